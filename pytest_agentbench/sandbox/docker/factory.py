"""The Docker sandbox factory: opens hardened, long-lived containers (DockerSandbox, in
docker.sandbox) on one engine, bounds their workspaces' disk, and removes what it made.

The container policy and the command wrapper live in `docker.policy`. Containers are registered
for removal before they start (docker.containers), and removed at close, at interpreter exit, by
`sweep` and by `gc`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, ImageNotFound

import pytest_agentbench.sandbox.disk as disk
import pytest_agentbench.sandbox.docker.policy as policy
import pytest_agentbench.sandbox.layers as layers
from pytest_agentbench.paths.trees import chown_tree, copy_tree
from pytest_agentbench.sandbox.docker.containers import (
    DockerErrors,
    docker_host,
    engine_answers,
    failure,
    in_use,
    install_exit_hooks,
    live_runs,
    owner_alive,
    register,
    remove_container,
    remove_volume,
)
from pytest_agentbench.sandbox.docker.sandbox import DockerSandbox
from pytest_agentbench.sandbox.docker.shipped_mounts import ShippedMounts
from pytest_agentbench.sandbox.port import SESSION_LABEL, EngineLost, SandboxError, SandboxSpec


class DockerSandboxFactory:
    """Opens DockerSandboxes on one engine (docker.from_env() unless a client is given)."""

    def __init__(self, client: docker.DockerClient | None = None, transfer: str = "bind",
                 engine: str = "default",
                 connect: Callable[[], docker.DockerClient] | None = None) -> None:
        """`transfer`: "bind" mounts the host directories (the engine sees our filesystem);
        "archive" ships them as volumes through the Docker API
        (sandbox/docker/shipped_mounts.py), for an engine that does not. `engine`: its name in
        records and messages. `connect` makes the client on first use (default:
        docker.from_env()); an engine that does not answer then raises EngineLost where it is
        first needed, inside an attempt."""
        if transfer not in ("bind", "archive"):
            raise ValueError(f"transfer must be bind or archive, not {transfer!r}")
        self._client = client
        self._connect = connect or docker.from_env
        self.transfer, self.engine = transfer, engine
        self._checked = False
        self._ipc_mode = "none"
        self._engine: dict[str, Any] | None = None
        self._open: dict[str, DockerSandbox] = {}
        self.os_facts_cache: dict[str, dict[str, str]] = {}  # image id -> OS facts
        self.private_shells: dict[str, bool] = {}  # image|shell|user -> checked execute-only
        self._lock = threading.Lock()
        self._loopfs_problem: str | None = ""  # "": not checked yet

    @property
    def client(self) -> docker.DockerClient:
        if not self._checked:
            try:
                if self._client is None:
                    self._client = self._connect()
                self._client.ping()
            except EngineLost:
                raise
            except (*DockerErrors, SandboxError) as exc:
                raise EngineLost(f"Docker engine {self.engine} not reachable: {self._host()} "
                                 f"({exc})") from exc
            self._checked = True
        assert self._client is not None
        return self._client

    def engine_facts(self) -> dict[str, Any]:
        if self._engine is None:
            version = self.client.version()
            self._engine = {"name": self.engine, "transfer": self.transfer,
                            "host": self._host(), "version": version.get("Version"),
                            "api_version": version.get("ApiVersion"), "os": version.get("Os"),
                            "kernel": version.get("KernelVersion"), "ipc_mode": self._ipc_mode}
        return dict(self._engine)

    def _host(self) -> str:
        base = getattr(getattr(self._client, "api", None), "base_url", None)
        return str(base) if base and self._client is not None and self.engine != "default" \
            else docker_host()

    def open(self, spec: SandboxSpec) -> DockerSandbox:
        client = self.client
        uid, gid = policy.sandbox_user()
        image = self._image_facts(spec.image)
        shipped: ShippedMounts | None = None
        if self.transfer == "archive":
            if not spec.workspace.is_dir():
                raise SandboxError(f"workspace {spec.workspace} is not a directory")
            if spec.ca_bundle is not None and not spec.ca_bundle.is_file():
                raise SandboxError(f"CA bundle {spec.ca_bundle} is not a file")
            spec.env_dir.mkdir(parents=True, exist_ok=True)
            shipped = ShippedMounts(client, spec, uid, gid, policy.labels(spec))
            try:
                mounts = shipped.load(str(image.get("id") or spec.image))
            except BaseException:
                with contextlib.suppress(SandboxError):
                    shipped.remove()
                raise
            args = policy.create_args(spec, uid, gid, self._ipc_mode, mounts)
        else:
            self._prepare_dirs(spec, uid, gid)
            args = policy.create_args(spec, uid, gid, self._ipc_mode)
        try:
            container_id = self._create(args)
        except BaseException:
            if shipped is not None:
                with contextlib.suppress(SandboxError):
                    shipped.remove()
            raise
        register(container_id, client)  # before start: Ctrl-C from here on leaves nothing behind
        sandbox = DockerSandbox(self, container_id, spec, args, image, (uid, gid), shipped)
        with self._lock:
            self._open[container_id] = sandbox
        try:
            client.api.start(container_id)
        except DockerErrors as exc:
            problem = failure(client.api, f"cannot start the sandbox container: {exc}")
            with contextlib.suppress(SandboxError):
                sandbox.close()
            raise problem from exc
        sandbox.hold()  # the first command then pays no exec (scoring's sandbox opens ahead)
        return sandbox

    def _create(self, args: dict[str, Any]) -> str:
        try:
            return str(self.client.containers.create(**args).id)
        except APIError as exc:
            if args["ipc_mode"] != "none" or "ipc" not in str(exc).lower():
                raise SandboxError(f"cannot create the sandbox container: {exc}") from exc
        except DockerErrors as exc:  # the engine went away: infrastructure, not a harness bug
            raise failure(self.client.api, f"cannot create the sandbox container: {exc}") \
                from exc
        self._ipc_mode = args["ipc_mode"] = "private"  # engines without --ipc=none
        return self._create(args)

    def _image_facts(self, image: str) -> dict[str, Any]:
        try:
            data = self.client.api.inspect_image(image)
        except ImageNotFound as exc:
            raise SandboxError(
                f"image {image} not found; build it with `agentbench doctor` "
                "(or pytest_agentbench.sandbox.docker.image.ensure_image())") from exc
        except DockerErrors as exc:
            raise failure(self.client.api, f"cannot inspect image {image}: {exc}") from exc
        digests = data.get("RepoDigests") or []
        labels = (data.get("Config") or {}).get("Labels") or {}
        return {"id": data.get("Id"), "digest": digests[0] if digests else None,
                "shell": labels.get(policy.SHELL_LABEL)}

    # -- workspace disk limits (sandbox/disk.py) --------------------------------------------------
    def provision(self, path: Path, disk_limit_mb: int | None) -> str:
        """See ports.SandboxFactory.provision: a loop-mounted ext4 where this host allows it
        ("filesystem"), otherwise "watched" (why is in every sandbox's facts). With archive
        transfer the directory is only the upload's source and the sandbox measures its volume:
        "measured" (sandbox/disk.py)."""
        if self.transfer == "archive":
            path.mkdir(parents=True, exist_ok=True)
            if any(path.iterdir()):
                raise SandboxError(f"cannot bound {path}: it must be an empty directory")
            return "measured" if disk_limit_mb else "none"
        try:
            layers.release_stale()  # before disk.provision releases stale loop filesystems
            mode, problem = disk.provision(path, disk_limit_mb, self.loopfs_problem())
        except OSError as exc:
            raise SandboxError(str(exc)) from exc
        if mode == "filesystem":
            install_exit_hooks()
        elif problem is not None:
            self._loopfs_problem = problem
        return mode

    def provision_from(self, path: Path, disk_limit_mb: int | None, base: Path) -> tuple[str, str]:
        """See ports.SandboxFactory.provision_from: an overlay where this host allows it
        (sandbox/layers.py), else a copy."""
        problem = layers.overlay_unavailable(self.loopfs_problem())
        if problem is None:
            layer = layers.layer_dir(path)
            path.mkdir(parents=True, exist_ok=True)
            mode = self.provision(layer, disk_limit_mb)
            try:
                layers.mount_overlay(path, base, layer)
            except (OSError, subprocess.SubprocessError) as exc:
                self.release(layer)
                raise SandboxError(f"cannot make a view of {base} at {path}: {exc}") from exc
            install_exit_hooks()
            return mode, "overlay"
        mode = self.provision(path, disk_limit_mb)
        copy_tree(base, path)
        return mode, "copy"

    read_only_mounts = True  # a read-only mount is enforced by the engine (SandboxSpec.env_dir)

    def release(self, path: Path, keep: bool = False) -> None:
        """See ports.SandboxFactory.release."""
        try:
            layer = layers.release(path, keep)
            if layer is not None:
                disk.release(layer)
                return
            disk.release(path, keep)
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"cannot release the workspace filesystem at {path}: {exc}") from exc

    def disk_mode(self, spec: SandboxSpec) -> str:
        if not spec.disk_limit_mb:
            return "none"
        if self.transfer == "archive":
            return "measured"
        layer = layers.layer_of(spec.workspace)  # a view: its writes land on its layer's fs
        bounded = disk.is_mounted(layer if layer is not None else spec.workspace)
        return "filesystem" if bounded else "watched"

    def loopfs_problem(self) -> str | None:
        if self.transfer == "archive":
            return ("the workspace is a volume on the engine (archive transfer): the sandbox "
                    "measures it after every command and every "
                    f"{disk.MEASURE_POLL_SEC:g}s while one runs, and caps each file at the limit")
        if self._loopfs_problem == "":
            self._loopfs_problem = disk.loopfs_unavailable(docker_host())
        return self._loopfs_problem

    @staticmethod
    def _prepare_dirs(spec: SandboxSpec, uid: int, gid: int) -> None:
        if not spec.workspace.is_dir():
            raise SandboxError(f"workspace {spec.workspace} is not a directory")
        if spec.ca_bundle is not None and not spec.ca_bundle.is_file():
            raise SandboxError(f"CA bundle {spec.ca_bundle} is not a file")
        # a read-only env dir may be an env-cache entry's: never touched, not even its owner
        writable = ([spec.workspace] + ([] if spec.env_read_only else [spec.env_dir])
                    + ([spec.pip_cache] if spec.pip_cache else []))
        root = hasattr(os, "geteuid") and os.geteuid() == 0
        for path in writable:
            path.mkdir(parents=True, exist_ok=True)
            if root and not layers.chown_changes(path, uid, gid):  # a view: what it changed
                chown_tree(path, uid, gid)

    def engine_answers(self) -> bool:
        """Whether the engine answers now (the AttemptPipeline asks, to tell a lost engine from a
        sandbox problem whatever raised the SandboxError)."""
        return self._client is None or engine_answers(self._client.api)  # never reached: no verdict

    def forget(self, container_id: str) -> None:
        with self._lock:
            self._open.pop(container_id, None)

    def close_all(self) -> None:
        with self._lock:
            sandboxes = list(self._open.values())
        for sandbox in sandboxes:
            sandbox.close()

    def sweep(self, labels: Mapping[str, str], session: str = "") -> int:
        """Remove every container (any state) carrying all these labels, then the volumes
        (archive transfer) carrying them. With `session`: a container another pytest session
        made is kept while its creator lives (a run of the same name elsewhere, still going);
        one a dead session left is removed."""
        found = self.containers({**labels})
        if session:
            found = [c for c in found if _swept_by(c, session)]
        removed = self._remove(found)
        self.remove_volumes(labels)
        return removed

    def remove_volumes(self, labels: Mapping[str, str]) -> int:
        """Remove the agentbench volumes carrying these labels that no container uses."""
        wanted = [f"{k}={v}" for k, v in sorted({**labels, policy.BASE_LABEL: "1"}.items())]
        try:
            found = self.client.api.volumes(filters={"label": wanted}).get("Volumes") or []
        except DockerErrors as exc:
            raise failure(self.client.api, f"cannot list volumes: {exc}") from exc
        removed = 0
        for volume in found:
            if (volume.get("Labels") or {}).get("agentbench.cache"):
                continue  # an engine cache (pip): kept across runs
            with contextlib.suppress(SandboxError):
                removed += remove_volume(self.client, volume["Name"])
        return removed

    def gc(self, older_than_sec: float | None = None, force: bool = False,
           labels: Mapping[str, str] | None = None) -> tuple[int, int]:
        """Remove the leftover agentbench containers (label agentbench=1, and `labels`),
        optionally only the older ones: never one of a live run (docker.containers.in_use)
        unless `force`. Returns (removed, kept because in use)."""
        every = self.containers({})  # whether a run is live: from all its containers
        wanted = (labels or {}).items()
        found = [c for c in every if wanted <= (c.get("Labels") or {}).items()]
        if older_than_sec is not None:
            cutoff = time.time() - older_than_sec
            found = [c for c in found if c.get("Created", 0) <= cutoff]
        kept = 0
        if not force:
            live = live_runs(every)
            found, kept = ([c for c in found if not in_use(c, live)],
                           sum(in_use(c, live) for c in found))
        removed = self._remove(found)
        self.release_stale_mounts()
        return removed, kept  # volumes: cli/doctor_engines.gc_engine, which spares live runs'

    @staticmethod
    def release_stale_mounts() -> int:
        """Unmount the workspace views and filesystems of dead processes (a killed worker's),
        views first: they sit on top of the filesystems."""
        return layers.release_stale() + disk.release_stale()

    def containers(self, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        """Summaries (docker ps -a) of the agentbench containers carrying these labels."""
        wanted = [f"{k}={v}" for k, v in sorted({**labels, policy.BASE_LABEL: "1"}.items())]
        try:
            return list(self.client.api.containers(all=True, filters={"label": wanted}))
        except DockerErrors as exc:
            raise failure(self.client.api, f"cannot list containers: {exc}") from exc

    def _remove(self, containers: list[dict[str, Any]]) -> int:
        removed = 0
        for info in containers:
            container_id = info["Id"]
            with self._lock:
                sandbox = self._open.pop(container_id, None)
            if sandbox is not None:
                sandbox.closed = True
            removed += remove_container(self.client.api, container_id)
        return removed


def _swept_by(container: Mapping[str, Any], session: str) -> bool:
    """Whether the sweep of `session` removes this container: its own, one made before
    containers carried their session, or another session's whose creator is gone."""
    labels = container.get("Labels") or {}
    made_by = labels.get(SESSION_LABEL, "")
    return made_by in ("", session) or not owner_alive(labels, container.get("State"))
