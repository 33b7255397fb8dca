"""The Docker sandbox: one hardened, long-lived container per sandbox; commands run by docker exec.

The container policy and the command wrapper live in `docker_policy` (re-exported here). Containers
are registered for removal before they start, and removed at close, at interpreter exit, by `sweep`
and by `gc`.

One command at a time per sandbox (a lock): when it ends, every process of the command user in
the container is killed. docker-py's exec has no timeout, so every command runs under
docker_policy.WRAPPER (`timeout -k 2`) and the host waits at most `timeout + HOST_GRACE_SEC`
before killing the command's processes itself. The exit status is the wrapper's as the engine saw
it (exec_inspect): nothing the command prints can decide it, and a killed wrapper reads as 128+n.
A container that stopped while the engine answers raises SandboxExited, an unreachable engine a
plain SandboxError.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import posixpath
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound

from pytest_agentbench.paths.files import Files
from pytest_agentbench.paths.host_files import HostFiles
from pytest_agentbench.paths.trees import chown_tree
from pytest_agentbench.sandbox import disk, local
from pytest_agentbench.sandbox import docker_policy as policy
from pytest_agentbench.sandbox.disk import DiskGuard
from pytest_agentbench.sandbox.docker_policy import BASE_LABEL as BASE_LABEL
from pytest_agentbench.sandbox.docker_policy import CA_PATH as CA_PATH
from pytest_agentbench.sandbox.docker_policy import HOME as HOME
from pytest_agentbench.sandbox.docker_policy import KILL_SCRIPT as KILL_SCRIPT
from pytest_agentbench.sandbox.docker_policy import OWNER_LABEL as OWNER_LABEL
from pytest_agentbench.sandbox.docker_policy import TMPFS as TMPFS
from pytest_agentbench.sandbox.docker_policy import WRAPPER as WRAPPER
from pytest_agentbench.sandbox.docker_policy import create_args as create_args
from pytest_agentbench.sandbox.docker_policy import owner as owner
from pytest_agentbench.sandbox.docker_policy import sandbox_user as sandbox_user
from pytest_agentbench.sandbox.docker_policy import sanitized as sanitized
from pytest_agentbench.sandbox.local import OutputBuffer
from pytest_agentbench.sandbox.port import ExecResult, SandboxError, SandboxExited, SandboxSpec

HOST_GRACE_SEC = 5.0
DockerErrors = (DockerException, requests.RequestException, OSError)

_LIVE: dict[str, docker.DockerClient] = {}
_LIVE_LOCK = threading.Lock()
_atexit_registered = False


def docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _register(container_id: str, client: docker.DockerClient) -> None:
    with _LIVE_LOCK:
        _LIVE[container_id] = client
    _at_exit()


def _at_exit() -> None:
    global _atexit_registered
    with _LIVE_LOCK:
        if not _atexit_registered:
            atexit.register(disk.release_all)  # runs after the containers are removed
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


def _drain(stream: Iterator[tuple[bytes | None, bytes | None]], out: OutputBuffer,
           err: OutputBuffer, errors: list[BaseException]) -> None:
    """Reader thread: copy a demultiplexed exec stream into two buffers."""
    try:
        for chunk_out, chunk_err in stream:
            out.append(chunk_out or b"")
            err.append(chunk_err or b"")
    except Exception as exc:  # noqa: BLE001 - reported by exec()
        errors.append(exc)


class DockerSandbox:
    def __init__(self, factory: DockerSandboxFactory, container_id: str, spec: SandboxSpec,
                 args: dict[str, Any], image: dict[str, Any], user: tuple[int, int]) -> None:
        self.spec = spec
        self.container_id = container_id
        self.uid, self.gid = user
        self.user = f"{self.uid}:{self.gid}"  # every exec; the container's own user is root
        owner_uid = self.uid if os.geteuid() == 0 else None
        self.files: Files = HostFiles(spec.workspace, owner_uid=owner_uid)
        self.disk = DiskGuard(spec.workspace, spec.disk_limit_mb, factory.disk_mode(spec))
        self._factory = factory
        self._api = factory.client.api
        self._args = args
        self._image = image
        self._shell = str(image.get("shell") or "bash")  # the image's execute-only shell
        self._os_facts: dict[str, str] | None = None
        self._broken: SandboxError | None = None
        self._lock = threading.Lock()
        self.closed = False

    # -- exec ---------------------------------------------------------------------------------
    def exec(
        self, command: str, *, timeout_sec: float, env: Mapping[str, str] | None = None,
        cwd: str | None = None, full_output: bool = False,
    ) -> ExecResult:
        """Run one command; concurrent calls wait their turn (see the module docstring)."""
        with self._lock:
            self._check_usable()
            return self._exec(command, max(float(timeout_sec), 0.001), env, cwd,
                              full_output or self.spec.full_logs)

    def _exec(self, command: str, budget: float, env: Mapping[str, str] | None,
              cwd: str | None, full: bool) -> ExecResult:
        nonce = secrets.token_hex(16)
        argv = [self._shell, "-p", "-c", WRAPPER, "agentbench", f"{budget:.3f}", command,
                self.disk.fsize_kib]
        workdir = posixpath.normpath(posixpath.join(self.spec.workdir, cwd or "."))
        cap = local.FULL_CAPTURE_CAP if full else local.CAPTURE_CAP
        out, err = OutputBuffer(cap), OutputBuffer(cap)
        self.disk.start()
        start = time.monotonic()
        try:
            exec_id = self._api.exec_create(
                self.container_id, argv, user=self.user, workdir=workdir,
                environment={**(env or {}), policy.NONCE_VAR: nonce})["Id"]
            stream = self._api.exec_start(exec_id, stream=True, demux=True)
        except DockerErrors as exc:
            raise self._failure("cannot start a command", exc) from exc
        errors: list[BaseException] = []
        reader = threading.Thread(target=_drain, args=(stream, out, err, errors), daemon=True)
        reader.start()
        overran, disk_hit = self._wait(reader, start + budget + HOST_GRACE_SEC)
        if overran or disk_hit:
            self._reap("it overran its deadline" if overran else "it exceeded the disk limit")
            reader.join(local.KILL_GRACE_SEC + 1)
            if reader.is_alive():
                stream.close()
                reader.join(1.0)
        elif errors:
            raise self._failure("lost the command's output stream", errors[0])
        elapsed = time.monotonic() - start
        seen = policy.parse_trailer(err.pop_trailer(policy.TRAILER + nonce.encode()), nonce)
        exit_code = self._exit_code(exec_id)
        if seen is None and not (overran or disk_hit):
            self._reap("its wrapper was killed")  # its processes may still run
        if exit_code is None:
            raise self._failure("cannot read the command's exit status",
                                TimeoutError("exec_inspect never reported an exit code"))
        timed_out = overran or (exit_code in (124, 137) and elapsed >= budget)
        disk_after = self.disk.hit_after(exit_code)  # also the baseline of the next command
        if disk_hit or disk_after:
            err.append(self.disk.message(killed=disk_hit).encode())
        oom = seen is not None and seen[1] and not timed_out
        return local.build_result(
            exit_code, out, err, int(elapsed * 1000), timed_out=timed_out, oom_killed=oom,
            full_logs=full, disk_limit_exceeded=disk_hit or disk_after)

    def _wait(self, reader: threading.Thread, deadline: float) -> tuple[bool, bool]:
        """Wait for the command's stream to end: (overran the deadline, grew past the disk
        limit, checked every WATCH_POLL_SEC when the limit is watched)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return reader.is_alive(), False
            reader.join(min(left, disk.WATCH_POLL_SEC) if self.disk.polls else left)
            if not reader.is_alive():
                return False, False
            if self.disk.polls and self.disk.grew_past():
                return False, True

    def _exit_code(self, exec_id: str) -> int | None:
        """The wrapper's exit status as the engine saw it (128+n if a signal killed it)."""
        deadline = time.monotonic() + 2.0
        with contextlib.suppress(*DockerErrors):
            while True:
                info = self._api.exec_inspect(exec_id)
                if not info.get("Running") and info.get("ExitCode") is not None:
                    return int(info["ExitCode"])
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.005)
        return None

    def _reap(self, why: str) -> None:
        """Kill every process of the command user in the container, from a fresh exec; if that
        fails, the sandbox is killed and SandboxExited (or SandboxError) raised."""
        problem: object = "the kill command failed"
        for attempt in range(3):
            try:
                kill_id = self._api.exec_create(self.container_id,
                                                [self._shell, "-p", "-c", KILL_SCRIPT],
                                                user=self.user)["Id"]
                self._api.exec_start(kill_id)
                if self._exit_code(kill_id) == 0:
                    return
            except DockerErrors as exc:
                problem = exc
            state = self._state()
            if state is None:
                raise SandboxError(f"cannot stop a command ({why}): {problem} (the engine does "
                                   "not answer or the container is gone)")
            if not state.get("Running"):
                raise self._exited(f"stopping a command ({why})", state)
            time.sleep(0.1 * (attempt + 1))  # e.g. the pids limit: a process may exit meanwhile
        with contextlib.suppress(*DockerErrors):
            self._api.kill(self.container_id)
        self._broken = SandboxExited(
            f"a command ({why}) could not be stopped ({problem}); the harness killed the "
            "sandbox", exit_code=None, status="killed by the harness")
        raise self._broken

    def _check_usable(self) -> None:
        if self.closed:
            raise SandboxError("sandbox is closed")
        if isinstance(self._broken, SandboxExited):
            raise SandboxExited(f"sandbox is unusable: {self._broken}",
                                exit_code=self._broken.exit_code,
                                oom_killed=self._broken.oom_killed, status=self._broken.status)
        if self._broken is not None:
            raise SandboxError(f"sandbox is unusable: {self._broken}")

    def _state(self) -> dict[str, Any] | None:
        try:
            return dict(self._api.inspect_container(self.container_id)["State"])
        except DockerErrors:
            return None

    def _exited(self, what: str, state: Mapping[str, Any]) -> SandboxExited:
        code, oom = state.get("ExitCode"), bool(state.get("OOMKilled"))
        cause = (f"its lifetime of {self.spec.lifetime_sec:g}s ran out" if code == 0 and not oom
                 else "it ran out of memory" if oom else "its init process ended")
        self._broken = SandboxExited(
            f"{what}: the sandbox container exited ({cause}; status {state.get('Status')}, "
            f"exit code {code}, OOMKilled={oom})",
            exit_code=code, oom_killed=oom, status=state.get("Status"))
        return self._broken

    def _failure(self, what: str, exc: BaseException) -> SandboxError:
        """SandboxExited if the container stopped; SandboxError if the engine does not answer."""
        state = self._state()
        if state is None:
            return SandboxError(f"{what}: {exc} (the engine does not answer or the container "
                                "is gone)")
        if not state.get("Running"):
            return self._exited(what, state)
        return SandboxError(f"{what}: {exc}")

    # -- facts and lifecycle --------------------------------------------------------------------
    def facts(self) -> dict[str, Any]:
        if self._os_facts is None:
            # The probe costs ~1 s (python, pip, pytest start-ups); the image decides its answer.
            key = str(self._image.get("id") or self.spec.image)
            cached = self._factory.os_facts_cache.get(key)
            if cached is None:
                probe = self.exec(local.FACTS_SCRIPT, timeout_sec=60)
                cached = self._factory.os_facts_cache[key] = local.parse_facts(probe.stdout)
            self._os_facts = cached
        return {
            "sandbox": "docker", "isolation": "container", "image": self.spec.image,
            "image_id": self._image.get("id"), "repo_digest": self._image.get("digest"),
            "container_id": self.container_id, "engine": self._factory.engine_facts(),
            "create_args": sanitized(self._args, self.spec), "os": dict(self._os_facts),
            "exec_user": self.user, "private_shell": self._image.get("shell") is not None,
            "disk_limit": {"mb": self.spec.disk_limit_mb, "enforced": self.disk.mode,
                           "filesystem_unavailable": self._factory.loopfs_problem()
                           if self.disk.mode == "watched" else None},
        }

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._factory.forget(self.container_id)
        remove_container(self._api, self.container_id)

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
        uid, gid = sandbox_user()
        self._prepare_dirs(spec, uid, gid)
        image = self._image_facts(spec.image)
        args = create_args(spec, uid, gid, self._ipc_mode)
        container_id = self._create(args)
        _register(container_id, client)  # before start: Ctrl-C from here on leaves nothing behind
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
            mode, problem = disk.provision(path, disk_limit_mb, self.loopfs_problem())
        except OSError as exc:
            raise SandboxError(str(exc)) from exc
        if mode == "filesystem":
            _at_exit()
        elif problem is not None:
            self._loopfs_problem = problem
        return mode

    def release(self, path: Path, keep: bool = False) -> None:
        """See ports.SandboxFactory.release."""
        try:
            disk.release(path, keep)
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"cannot release the workspace filesystem at {path}: {exc}") from exc

    def disk_mode(self, spec: SandboxSpec) -> str:
        if not spec.disk_limit_mb:
            return "none"
        return "filesystem" if disk.is_mounted(spec.workspace) else "watched"

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
        writable = [spec.workspace, spec.env_dir] + ([spec.pip_cache] if spec.pip_cache else [])
        for path in writable:
            path.mkdir(parents=True, exist_ok=True)
            if hasattr(os, "geteuid") and os.geteuid() == 0:
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
        disk.release_stale()
        return removed

    def containers(self, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        """Summaries (docker ps -a) of the agentbench containers carrying these labels."""
        wanted = [f"{k}={v}" for k, v in sorted({**labels, BASE_LABEL: "1"}.items())]
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
