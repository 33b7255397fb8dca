"""Volumes that stand in for a sandbox's host directories on an engine that cannot see them.

On a remote engine (or one whose daemon cannot see our paths) a bind mount would fail, or worse,
mount whatever that machine has at the same path. `ShippedMounts` gives the sandbox fresh volumes
on its engine instead, filled through the Docker archive API before the sandbox starts: the
workspace, /env, the CA bundle (as /etc/ssl/certs/ca-certificates.crt), the task's pip cache
(a named volume that stays on the engine between sandboxes, so pip downloads once per engine)
and the spec's extra mounts (a command agent's program and gateway directory: copies owned by
root, mounted read-only; a socket is not copied, the model relay goes through the API instead;
an installed program is copied once per engine and kept there: sandbox/docker/kept_copies.py).
A loader container that never starts takes the upload (the sandbox's own /env mount is read-only
after setup); the top-level directories in the archive give each volume's root its owner.
`sync_back` copies what the sandbox left in its writable directories back to the host ones when
it closes, so everything the host does between sandboxes (the pristine copy, the env cache, the
kept workspace) works on the same directories as with a local engine. Volumes carry the
agentbench labels: the sweep and `agentbench gc` find them, and this process removes its own at
exit.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Mapping
from pathlib import Path

import docker
from docker.types import Mount

from pytest_agentbench.sandbox.archives import (
    INCOMPLETE_NOTE,
    ArchiveRefused,
    extract_into,
    tar_chunks,
)
from pytest_agentbench.sandbox.docker.containers import (
    DockerErrors,
    failure,
    register,
    register_volume,
    remove_volume,
)
from pytest_agentbench.sandbox.docker.kept_copies import kept_copy, shipping_through
from pytest_agentbench.sandbox.docker.policy import HOME
from pytest_agentbench.sandbox.port import SandboxError, SandboxSpec

CA_DIR = "/etc/ssl/certs"  # the bundle is ca-certificates.crt in it, as the image has it
PIP_VOLUME_PREFIX = "agentbench-pip-"
LOADER_ROOT = "/agentbench-load"
ENV_MAX_BYTES = 20 << 30  # what /env may ship or bring back (the workspace: its disk limit)
PULL_CHUNK = 1 << 20
KEEP_ONLY_PHASE = "agent"  # its copy-back only serves the kept workspace (attempt_config.sync_back)

def pip_volume_name(host_dir: Path) -> str:
    """The engine's pip-cache volume for a task's host cache directory (same key, each engine)."""
    return PIP_VOLUME_PREFIX + hashlib.sha256(str(host_dir).encode()).hexdigest()[:16]


class ShippedMounts:
    """The volumes of one sandbox. `load` creates and fills them and returns the sandbox's
    mounts; `sync_back` copies the writable ones back; `remove` deletes them (not pip's)."""

    def __init__(self, client: docker.DockerClient, spec: SandboxSpec, uid: int, gid: int,
                 labels: Mapping[str, str]) -> None:
        self.client, self.spec, self.uid, self.gid = client, spec, uid, gid
        self.labels = dict(labels)
        self.volumes: dict[str, str] = {}  # role (workspace, env, ca) -> volume name
        self.roles: dict[str, str] = {}  # volume name -> "<workspace>", ... for the record
        self.incomplete: str | None = None  # why the kept workspace's copy-back stopped

    def _volume(self, role: str) -> str:
        try:
            name = str(self.client.api.create_volume(None, labels=self.labels)["Name"])
        except DockerErrors as exc:
            raise failure(self.client.api, f"cannot create a volume for the {role}: {exc}") \
                from exc
        register_volume(name, self.client)
        self.volumes[role] = name
        self.roles[name] = {"env": "<env_dir>"}.get(role, f"<{role}>")
        return name

    def load(self, image: str) -> list[Mount]:
        spec = self.spec
        trees: list[tuple[str, Path | None]] = [("workspace", spec.workspace),
                                                ("env", spec.env_dir)]
        loader_mounts = [
            Mount(f"{LOADER_ROOT}/workspace", self._volume("workspace"), type="volume"),
            Mount(f"{LOADER_ROOT}/env", self._volume("env"), type="volume"),
        ]
        mounts = [Mount(spec.workdir, self.volumes["workspace"], type="volume"),
                  Mount("/env", self.volumes["env"], type="volume", read_only=spec.env_read_only)]
        if spec.ca_bundle is not None:
            ca = self._volume("ca_bundle")
            loader_mounts.append(Mount(f"{LOADER_ROOT}/ca", ca, type="volume"))
            mounts.append(Mount(CA_DIR, ca, type="volume", read_only=True))
        if spec.pip_cache is not None:
            pip = pip_volume_name(spec.pip_cache)
            self.roles[pip] = "<pip_cache>"
            try:
                self.client.api.create_volume(pip, labels={"agentbench": "1",
                                                           "agentbench.cache": "pip"})
            except DockerErrors as exc:
                raise SandboxError(f"cannot create the pip cache volume: {exc}") from exc
            loader_mounts.append(Mount(f"{LOADER_ROOT}/pip", pip, type="volume"))
            mounts.append(Mount(posixpath.join(HOME, ".cache/pip"), pip, type="volume"))
            trees.append(("pip", None))
        root_trees: list[tuple[str, Path | None]] = []
        for i, extra in enumerate(spec.extra_mounts):  # a command agent's program, gateway dir
            if extra.cache_key is not None:  # an installed program: one copy per engine
                kept = kept_copy(self.client, image, extra.cache_key, extra.host)
                self.roles[kept] = f"<{extra.env}>"
                mounts.append(Mount(extra.target, kept, type="volume", read_only=True))
                continue
            volume = self._volume(f"extra{i}")
            self.roles[volume] = f"<{extra.env}>"
            loader_mounts.append(Mount(f"{LOADER_ROOT}/extra{i}", volume, type="volume"))
            mounts.append(Mount(extra.target, volume, type="volume", read_only=True))
            root_trees.append((f"extra{i}", extra.host))
        self._upload(image, loader_mounts, trees, root_trees)
        return mounts

    def _upload(self, image: str, mounts: list[Mount], trees: list[tuple[str, Path | None]],
                root_trees: list[tuple[str, Path | None]]) -> None:
        """`trees` owned by the sandbox user, `root_trees` by root (read-only copies of host
        directories: the sandbox user cannot change them, the mount aside; it may read and run
        what their owner could, e.g. an install's 0700 top directory)."""
        api = self.client.api
        try:
            loader = str(api.create_container(
                image, command=["true"], user="0:0", network_disabled=True, labels=self.labels,
                host_config=api.create_host_config(mounts=mounts, network_mode="none"))["Id"])
        except DockerErrors as exc:
            raise SandboxError(f"cannot create the container that loads the volumes: {exc}") \
                from exc
        register(loader, self.client)
        limit = self.spec.disk_limit_mb
        budgets = {"env": ENV_MAX_BYTES, **({"workspace": limit << 20} if limit else {})}
        with shipping_through(api, loader, "refused to ship to the engine",
                              "cannot ship the workspace to the engine"):
            api.put_archive(loader, LOADER_ROOT, tar_chunks(trees, self.uid, self.gid,
                                                            budgets=budgets))
            if root_trees:
                api.put_archive(loader, LOADER_ROOT, tar_chunks(
                    root_trees, 0, 0, budgets={top: ENV_MAX_BYTES for top, _ in root_trees},
                    owner_bits_for_all=True))
            if self.spec.ca_bundle is not None:
                bundle = self.spec.ca_bundle.read_bytes()
                api.put_archive(loader, LOADER_ROOT, _one_file("ca/ca-certificates.crt", bundle,
                                                               self.uid, self.gid))

    def sync_back(self, container_id: str) -> None:
        """The sandbox's workspace (and /env, when it was writable) copied back over the host
        directories, each bounded (archives.extract_into: apparent bytes, entries). Raises
        SandboxError when the engine cannot give them or a copy is refused, except for the
        workspace of an agent sandbox: that copy only serves the kept workspace, so one that
        stops at a bound is kept as far as it got, with INCOMPLETE_NOTE saying why, and the
        attempt keeps its own outcome (`incomplete` holds the reason)."""
        limit = self.spec.disk_limit_mb
        pulls = [(self.spec.workdir, self.spec.workspace, limit << 20 if limit else None)]
        if not self.spec.env_read_only:
            pulls.append(("/env", self.spec.env_dir, ENV_MAX_BYTES))
        keep_only = self.spec.labels.get("agentbench.phase") == KEEP_ONLY_PHASE
        for inside, host, max_bytes in pulls:
            try:
                self._pull(container_id, inside, host, max_bytes)
            except ArchiveRefused as exc:
                if keep_only and host == self.spec.workspace:
                    self.incomplete = f"the copy of {inside} stopped: {exc}"
                    (host / INCOMPLETE_NOTE).write_text(
                        f"agentbench: this copy of the workspace is incomplete: {exc}\n", "utf-8")
                    continue
                raise SandboxError(f"refused what the engine sent for {inside}: {exc}") from exc
            except DockerErrors as exc:  # a stream cut mid-way, the engine gone
                raise failure(self.client.api,
                              f"cannot copy {inside} back from the engine: {exc}") from exc
            except Exception as exc:  # tarfile.TarError and its filter errors
                raise SandboxError(f"refused what the engine sent for {inside}: {exc}") from exc

    def _pull(self, container_id: str, inside: str, host: Path, max_bytes: int | None) -> None:
        """One directory's archive extracted over `host`. The response is closed whatever
        happens: a stream left unread holds the engine's archive request open, and with it the
        container, whose removal then waits for the client's timeout (60 s)."""
        api = self.client.api
        response = api._get(api._url("/containers/{0}/archive", container_id),
                            params={"path": inside}, stream=True)
        try:
            api._raise_for_status(response)
            extract_into(response.iter_content(PULL_CHUNK, False), host,
                         posixpath.basename(inside.rstrip("/")), max_bytes)
        finally:
            response.close()

    def remove(self) -> None:
        for name in list(self.volumes.values()):
            remove_volume(self.client, name)
        self.volumes.clear()


def _one_file(name: str, data: bytes, uid: int, gid: int) -> bytes:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.uid, info.gid = len(data), 0o644, uid, gid
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()

