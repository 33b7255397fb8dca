"""The sandbox port (port.py: `Sandbox`, `SandboxFactory`, `SandboxSpec`, `ExecResult`) beside its
adapters: Docker (docker.py, the factory; docker_sandbox.py, one container's exec;
docker_containers.py, the engine address and live-container registry; docker_policy.py, how a
container is created and each command bounded) and local (local.py, host subprocesses). Their
shared output capture is capture.py; the workspace disk limit is disk.py; the runner image,
image.py.

May import: paths, text, schemas. Only the adapters import docker.
"""
