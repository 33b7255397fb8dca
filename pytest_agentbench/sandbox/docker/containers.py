"""The Docker engine's address and errors, and the containers this process created.

A container is registered before it starts and forgotten when removed; whatever is still
registered at interpreter exit is removed then (atexit), and SIGTERM unwinds like Ctrl-C so that
teardown and atexit run. Workspace filesystems (sandbox/disk.py) are released after that.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import docker
import requests
from docker.errors import DockerException, NotFound

import pytest_agentbench.sandbox.disk as disk
import pytest_agentbench.sandbox.layers as layers
import pytest_agentbench.sandbox.mounts as mounts
from pytest_agentbench.sandbox.port import EngineLost, SandboxError

DockerErrors = (DockerException, requests.RequestException, OSError)

_LIVE: dict[str, docker.DockerClient] = {}
_LIVE_VOLUMES: dict[str, docker.DockerClient] = {}  # sandbox/docker/shipped_mounts.py's
_LIVE_LOCK = threading.Lock()
_atexit_registered = False


def docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def register(container_id: str, client: docker.DockerClient) -> None:
    with _LIVE_LOCK:
        _LIVE[container_id] = client
    install_exit_hooks()


def install_exit_hooks() -> None:
    """Once per process: at exit remove the live containers, then release the workspace
    filesystems; SIGTERM unwinds like Ctrl-C."""
    global _atexit_registered
    with _LIVE_LOCK:
        if not _atexit_registered:
            atexit.register(disk.release_all)  # runs after the containers are removed ...
            atexit.register(layers.release_all)  # ... and the overlays on top of them
            atexit.register(remove_live_volumes)  # ... after the containers using them
            atexit.register(remove_live_containers)
            _atexit_registered = True
            _sigterm_as_interrupt()


def _sigterm_as_interrupt() -> None:
    """Let SIGTERM unwind like Ctrl-C (so teardown and atexit remove the containers), unless
    someone else already handles it."""
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        signal.signal(signal.SIGTERM, _raise_interrupt)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _unregister(container_id: str) -> None:
    with _LIVE_LOCK:
        _LIVE.pop(container_id, None)


def remove_container(api: Any, container_id: str) -> bool:
    """Force-remove one container (and its anonymous volumes); False if it was already gone."""
    try:
        api.remove_container(container_id, force=True, v=True)
        removed = True
    except NotFound:
        removed = False
    except DockerErrors as exc:  # stays registered: the atexit hook tries again
        raise SandboxError(f"cannot remove container {container_id[:12]}: {exc}") from exc
    _unregister(container_id)
    return removed


def remove_live_containers() -> int:
    """Remove every container this process created and has not removed yet (atexit)."""
    with _LIVE_LOCK:
        live = list(_LIVE.items())
    for container_id, client in live:
        with contextlib.suppress(SandboxError):
            remove_container(client.api, container_id)
    return len(live)


def register_volume(name: str, client: docker.DockerClient) -> None:
    with _LIVE_LOCK:
        _LIVE_VOLUMES[name] = client
    install_exit_hooks()


def remove_volume(client: docker.DockerClient, name: str) -> bool:
    """Remove one volume; False if it was already gone."""
    try:
        client.api.remove_volume(name, force=True)
        removed = True
    except NotFound:
        removed = False
    except DockerErrors as exc:  # stays registered: the atexit hook tries again
        raise SandboxError(f"cannot remove volume {name[:12]}: {exc}") from exc
    with _LIVE_LOCK:
        _LIVE_VOLUMES.pop(name, None)
    return removed


def remove_live_volumes() -> int:
    """Remove every volume this process made and has not removed yet (atexit)."""
    with _LIVE_LOCK:
        live = list(_LIVE_VOLUMES.items())
    for name, client in live:
        with contextlib.suppress(SandboxError):
            remove_volume(client, name)
    return len(live)


OWNER_LABEL = "agentbench.owner"  # docker.policy.OWNER_LABEL: <host>:<pid> of the creator
RUN_LABEL = "agentbench.run_id"  # core/attempt_config.sandbox_spec's


def owner_alive(labels: Mapping[str, str], state: str | None) -> bool:
    """Whether what carries these labels was made by a process still alive: one of this machine
    (by pid), or (another machine's) a container still running (`state`)."""
    host, _, pid = labels.get(OWNER_LABEL, "").rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        return mounts.pid_alive(int(pid))
    return bool(host) and state == "running"


def live_runs(items: Iterable[Mapping[str, Any]]) -> set[str]:
    """The run ids among these containers' (or volumes') that a live process owns: a run whose
    worker died is still live while another of its processes runs (its controller sweeps it)."""
    return {str((item.get("Labels") or {}).get(RUN_LABEL))
            for item in items
            if (item.get("Labels") or {}).get(RUN_LABEL)
            and owner_alive(item.get("Labels") or {}, item.get("State"))}


def in_use(item: Mapping[str, Any], live: set[str]) -> bool:
    """Whether a container (or volume) summary belongs to a live run: its own creator is alive,
    or its run is among `live` (live_runs). Only what is not in use is a leftover."""
    labels = item.get("Labels") or {}
    return owner_alive(labels, item.get("State")) or labels.get(RUN_LABEL, "") in live


def engine_answers(api: Any) -> bool:
    """Whether the engine answers a ping (within the client's own timeout)."""
    try:
        api.ping()
    except DockerErrors:
        return False
    return True


def failure(api: Any, message: str) -> SandboxError:
    """EngineLost when the engine no longer answers, else a plain SandboxError."""
    if engine_answers(api):
        return SandboxError(message)
    return EngineLost(f"{message} (the engine does not answer)")
