"""The Docker sandbox factory: opens hardened, long-lived containers (DockerSandbox, in
docker_sandbox) on one engine, bounds their workspaces' disk, and removes what it made.

The container policy and the command wrapper live in `docker_policy`. Containers are registered
for removal before they start (docker_containers), and removed at close, at interpreter exit, by
`sweep` and by `gc`.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, ImageNotFound

import pytest_agentbench.sandbox.disk as disk
import pytest_agentbench.sandbox.docker_policy as policy
import pytest_agentbench.sandbox.layers as layers
from pytest_agentbench.paths.trees import chown_tree, copy_tree
from pytest_agentbench.sandbox.docker_containers import (
    DockerErrors,
    docker_host,
    install_exit_hooks,
    register,
    remove_container,
)
from pytest_agentbench.sandbox.docker_sandbox import DockerSandbox
from pytest_agentbench.sandbox.port import SandboxError, SandboxSpec


class DockerSandboxFactory:
    """Opens DockerSandboxes on one engine (docker.from_env() unless a client is given)."""

    def __init__(self, client: docker.DockerClient | None = None) -> None:
        self._client = client
        self._checked = False
        self._ipc_mode = "none"
        self._engine: dict[str, Any] | None = None
        self._open: dict[str, DockerSandbox] = {}
        self.os_facts_cache: dict[str, dict[str, str]] = {}  # image id -> OS facts
        self._lock = threading.Lock()
        self._loopfs_problem: str | None = ""  # "": not checked yet

    @property
    def client(self) -> docker.DockerClient:
        if not self._checked:
            try:
                if self._client is None:
                    self._client = docker.from_env()
                self._client.ping()
            except DockerErrors as exc:
                raise SandboxError(f"Docker daemon not reachable: {docker_host()} ({exc})") from exc
            self._checked = True
        assert self._client is not None
        return self._client

    def engine_facts(self) -> dict[str, Any]:
        if self._engine is None:
            version = self.client.version()
            self._engine = {"host": docker_host(), "version": version.get("Version"),
                            "api_version": version.get("ApiVersion"), "os": version.get("Os"),
                            "kernel": version.get("KernelVersion"), "ipc_mode": self._ipc_mode}
        return dict(self._engine)

    def open(self, spec: SandboxSpec) -> DockerSandbox:
        client = self.client
        uid, gid = policy.sandbox_user()
        self._prepare_dirs(spec, uid, gid)
        image = self._image_facts(spec.image)
        args = policy.create_args(spec, uid, gid, self._ipc_mode)
        container_id = self._create(args)
        register(container_id, client)  # before start: Ctrl-C from here on leaves nothing behind
        sandbox = DockerSandbox(self, container_id, spec, args, image, (uid, gid))
        with self._lock:
            self._open[container_id] = sandbox
        try:
            client.api.start(container_id)
        except DockerErrors as exc:
            sandbox.close()
            raise SandboxError(f"cannot start the sandbox container: {exc}") from exc
        return sandbox

    def _create(self, args: dict[str, Any]) -> str:
        try:
            return str(self.client.containers.create(**args).id)
        except APIError as exc:
            if args["ipc_mode"] != "none" or "ipc" not in str(exc).lower():
                raise SandboxError(f"cannot create the sandbox container: {exc}") from exc
        except DockerErrors as exc:  # the engine went away: infrastructure, not a harness bug
            raise SandboxError(f"cannot create the sandbox container: {exc}") from exc
        self._ipc_mode = args["ipc_mode"] = "private"  # engines without --ipc=none
        return self._create(args)

    def _image_facts(self, image: str) -> dict[str, Any]:
        try:
            data = self.client.api.inspect_image(image)
        except ImageNotFound as exc:
            raise SandboxError(f"image {image} not found; build it with `agentbench doctor` "
                               "(or pytest_agentbench.sandbox.image.ensure_image())") from exc
        except DockerErrors as exc:
            raise SandboxError(f"cannot inspect image {image}: {exc}") from exc
        digests = data.get("RepoDigests") or []
        labels = (data.get("Config") or {}).get("Labels") or {}
        return {"id": data.get("Id"), "digest": digests[0] if digests else None,
                "shell": labels.get(policy.SHELL_LABEL)}

    # -- workspace disk limits (sandbox/disk.py) --------------------------------------------------
    def provision(self, path: Path, disk_limit_mb: int | None) -> str:
        """See ports.SandboxFactory.provision: a loop-mounted ext4 where this host allows it
        ("filesystem"), otherwise "watched" (why is in every sandbox's facts)."""
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
        layer = layers.layer_of(spec.workspace)  # a view: its writes land on its layer's fs
        bounded = disk.is_mounted(layer if layer is not None else spec.workspace)
        return "filesystem" if bounded else "watched"

    def loopfs_problem(self) -> str | None:
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

    def forget(self, container_id: str) -> None:
        with self._lock:
            self._open.pop(container_id, None)

    def close_all(self) -> None:
        with self._lock:
            sandboxes = list(self._open.values())
        for sandbox in sandboxes:
            sandbox.close()

    def sweep(self, labels: Mapping[str, str]) -> int:
        """Remove every container (any state) carrying all these labels."""
        return self._remove(self.containers({**labels}))

    def gc(self, older_than_sec: float | None = None) -> int:
        """Remove agentbench containers (label agentbench=1), optionally only the older ones."""
        found = self.containers({})
        if older_than_sec is not None:
            cutoff = time.time() - older_than_sec
            found = [c for c in found if c.get("Created", 0) <= cutoff]
        removed = self._remove(found)
        self.release_stale_mounts()
        return removed

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
            raise SandboxError(f"cannot list containers: {exc}") from exc

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
