"""Copies of host directories kept on an engine that cannot see them: a command agent's
installed program, shipped once per engine instead of once per sandbox.

`kept_copy` returns the name of a volume holding a root-owned copy of a host directory (what
its owner could read and run, everyone may; nobody may write: archives.tar_chunks
owner_bits_for_all) under a key whose content never changes (core/attempt.py gives an
installed program's install key and the time its install finished). The first sandbox that
needs it fills it through a loader container, then writes MARKER: a volume without it (a fill
that was cut off) is filled again. Workers of this machine fill a volume one at a time (a lock
file per engine and volume). The volumes carry `agentbench.cache=program`: like the pip cache
they stay on the engine across runs (sweeps and `agentbench gc` spare them; `docker volume rm`
removes one).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import docker
from docker.errors import NotFound
from docker.types import Mount

from pytest_agentbench.paths.held_lock import held_exclusively
from pytest_agentbench.sandbox.archives import ArchiveRefused, tar_chunks
from pytest_agentbench.sandbox.docker.containers import (
    DockerErrors,
    failure,
    register,
    remove_container,
)
from pytest_agentbench.sandbox.port import SandboxError

PREFIX = "agentbench-copy-"
MARKER = ".agentbench-shipped"
LOADER_ROOT = "/agentbench-load"
MAX_BYTES = 20 << 30
LABELS = {"agentbench": "1", "agentbench.cache": "program"}


def kept_volume_name(key: str) -> str:
    return PREFIX + hashlib.sha256(key.encode()).hexdigest()[:16]


def _filling_lock(client: docker.DockerClient, name: str) -> Path:
    """The lock file of filling the copy `name` on this client's engine."""
    where = hashlib.sha256(f"{getattr(client.api, 'base_url', '')}\n{name}".encode())
    return Path(tempfile.gettempdir()) / f"agentbench-copy-{where.hexdigest()[:16]}.lock"


def kept_copy(client: docker.DockerClient, image: str, key: str, host: Path) -> str:
    """The volume holding the copy of `host` kept under `key` (made and filled when missing)."""
    api, name = client.api, kept_volume_name(key)
    with held_exclusively(_filling_lock(client, name)):
        try:
            api.create_volume(name, labels=LABELS)  # the existing one when it is there
            loader = str(api.create_container(
                image, command=["true"], user="0:0", network_disabled=True, labels=LABELS,
                host_config=api.create_host_config(
                    mounts=[Mount(f"{LOADER_ROOT}/copy", name, type="volume")],
                    network_mode="none"))["Id"])
        except DockerErrors as exc:
            raise failure(api, f"cannot make the engine's copy of {host}: {exc}") from exc
        register(loader, client)
        with shipping_through(api, loader, f"refused to ship {host} to the engine",
                              f"cannot ship {host} to the engine"):
            if not _complete(api, loader):
                api.put_archive(loader, LOADER_ROOT, tar_chunks(
                    [("copy", host)], 0, 0, budgets={"copy": MAX_BYTES},
                    owner_bits_for_all=True))
                api.put_archive(loader, f"{LOADER_ROOT}/copy", _marker())
    return name


@contextlib.contextmanager
def shipping_through(api: docker.APIClient, loader: str, refused: str, cannot: str
                     ) -> Iterator[None]:
    """Shipping host files through the loader container `loader` (removed at the end, an error
    in removing it ignored): a bound that refused them (ArchiveRefused: nothing more was sent)
    becomes SandboxError("<refused>: ..."); anything else that failed (a host file that could not
    be read, the engine's error) containers.failure("<cannot>: ..."): EngineLost when the engine
    no longer answers. (docker-py's and requests' errors are OSErrors too: one branch for both,
    so a lost engine is never taken for an unreadable file.)"""
    try:
        yield
    except ArchiveRefused as exc:
        raise SandboxError(f"{refused}: {exc}") from exc
    except DockerErrors as exc:
        raise failure(api, f"{cannot}: {exc}") from exc
    finally:
        with contextlib.suppress(SandboxError):
            remove_container(api, loader)


def _complete(api: docker.APIClient, loader: str) -> bool:
    try:
        stream, _ = api.get_archive(loader, f"{LOADER_ROOT}/copy/{MARKER}")
    except NotFound:
        return False
    for _chunk in stream:  # read to the end: an unread stream holds the request open
        pass
    return True


def _marker() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(MARKER)
        info.size, info.mode = 0, 0o444
        tar.addfile(info, io.BytesIO(b""))
    return buffer.getvalue()
