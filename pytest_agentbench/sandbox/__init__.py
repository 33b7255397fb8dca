"""The sandbox port (port.py: `Sandbox`, `SandboxFactory`, `SandboxSpec`, `ExecResult`) beside its
adapters: Docker (the docker/ package: factory.py opens containers, sandbox.py runs one
container's commands, containers.py holds the engine address and live-container registry,
policy.py how a container is created and each command bounded, image.py the runner image,
shipped_mounts.py and container_files.py an engine that cannot see this host, engines.py several
engines) and local (local.py, host subprocesses). Their shared output capture is capture.py; the
workspace filesystems (disk limits, views of an environment-cache entry) are disk.py, loopfs.py,
layers.py and mounts.py; archives.py builds the tar streams the Docker adapter ships.

May import: paths, text, schemas. Only the Docker adapter imports docker.
"""
