"""The sandbox port (port.py) beside its adapters: Docker (docker.py, docker-py) and local
(local.py, host subprocesses), their shared output capture, the disk limit and the runner image.

May import: paths, text, schemas.
"""
