"""The Docker sandbox: one hardened, long-lived container per sandbox; commands run by docker exec.

The container policy and the command wrapper live in `docker_policy` (re-exported here). Containers
are registered for removal before they start, and removed at close, at interpreter exit, by `sweep`
and by `gc`.

docker-py's exec has no timeout, so every command runs under docker_policy.WRAPPER (`timeout -k 2`,
then every process of the command is killed, so background jobs never outlive it) and the host
waits at most `timeout + HOST_GRACE_SEC` before killing the command's processes itself.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import posixpath
import secrets
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound

from pytest_agentbench.core.ports import ExecResult, Files, SandboxError, SandboxSpec
from pytest_agentbench.core.workspace import HostFiles, chown_tree
from pytest_agentbench.sandbox import local
from pytest_agentbench.sandbox.docker_policy import BASE_LABEL as BASE_LABEL
from pytest_agentbench.sandbox.docker_policy import CA_PATH as CA_PATH
from pytest_agentbench.sandbox.docker_policy import HOME as HOME
from pytest_agentbench.sandbox.docker_policy import KILL_SCRIPT as KILL_SCRIPT
from pytest_agentbench.sandbox.docker_policy import MARKER_VAR as MARKER_VAR
from pytest_agentbench.sandbox.docker_policy import OOM_COUNT as OOM_COUNT
from pytest_agentbench.sandbox.docker_policy import OWNER_LABEL as OWNER_LABEL
from pytest_agentbench.sandbox.docker_policy import REAP as REAP
from pytest_agentbench.sandbox.docker_policy import TMPFS as TMPFS
from pytest_agentbench.sandbox.docker_policy import WRAPPER as WRAPPER
from pytest_agentbench.sandbox.docker_policy import create_args as create_args
from pytest_agentbench.sandbox.docker_policy import owner as owner
from pytest_agentbench.sandbox.docker_policy import sandbox_user as sandbox_user
from pytest_agentbench.sandbox.docker_policy import sanitized as sanitized
from pytest_agentbench.sandbox.local import OutputBuffer

HOST_GRACE_SEC = 5.0
DockerErrors = (DockerException, requests.RequestException, OSError)

_LIVE: dict[str, docker.DockerClient] = {}
_LIVE_LOCK = threading.Lock()
_atexit_registered = False


def docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _register(container_id: str, client: docker.DockerClient) -> None:
    global _atexit_registered
    with _LIVE_LOCK:
        _LIVE[container_id] = client
        if not _atexit_registered:
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
                 args: dict[str, Any], image: dict[str, Any]) -> None:
        self.spec = spec
        self.container_id = container_id
        self.uid, self.gid = (int(part) for part in args["user"].split(":"))
        owner_uid = self.uid if os.geteuid() == 0 else None
        self.files: Files = HostFiles(spec.workspace, owner_uid=owner_uid)
        self._factory = factory
        self._api = factory.client.api
        self._args = args
        self._image = image
        self._os_facts: dict[str, str] | None = None
        self._broken: str | None = None
        self.closed = False

    # -- exec ---------------------------------------------------------------------------------
    def exec(
        self, command: str, *, timeout_sec: float, env: Mapping[str, str] | None = None,
        cwd: str | None = None, full_output: bool = False,
    ) -> ExecResult:
        self._check_usable()
        mark = secrets.token_hex(8)
        budget = max(float(timeout_sec), 0.001)
        argv = ["bash", "-c", WRAPPER, "agentbench", f"{budget:.3f}", command]
        workdir = posixpath.normpath(posixpath.join(self.spec.workdir, cwd or "."))
        full = full_output or self.spec.full_logs
        cap = local.FULL_CAPTURE_CAP if full else local.CAPTURE_CAP
        out, err = OutputBuffer(cap), OutputBuffer(cap)
        start = time.monotonic()
        try:
            exec_id = self._api.exec_create(
                self.container_id, argv, user=self._args["user"], workdir=workdir,
                environment={**(env or {}), MARKER_VAR: mark})["Id"]
            stream = self._api.exec_start(exec_id, stream=True, demux=True)
        except DockerErrors as exc:
            raise self._failure("cannot start a command", exc) from exc
        errors: list[BaseException] = []
        reader = threading.Thread(target=_drain, args=(stream, out, err, errors), daemon=True)
        reader.start()
        reader.join(budget + HOST_GRACE_SEC)
        overran = reader.is_alive()
        if overran:
            self._kill_exec(mark)
            reader.join(local.KILL_GRACE_SEC + 1)
            if reader.is_alive():
                stream.close()
                reader.join(1.0)
        elif errors:
            raise self._failure("lost the command's output stream", errors[0])
        elapsed = time.monotonic() - start
        trailer = err.pop_trailer(b"\n\x1eagentbench-end:" + mark.encode() + b" ")
        if trailer is None and not overran:
            self._kill_exec(mark)  # the wrapper died early: its leftovers may still run
        exit_code, oom = self._outcome(exec_id, trailer, overran)
        timed_out = overran or (exit_code in (124, 137) and elapsed >= budget)
        return local.build_result(
            exit_code, out, err, int(elapsed * 1000), timed_out=timed_out,
            oom_killed=oom and not timed_out, full_logs=full)

    def _outcome(self, exec_id: str, trailer: bytes | None, overran: bool) -> tuple[int, bool]:
        """Exit code and OOM flag, from the wrapper's trailer or else from exec_inspect."""
        if trailer is not None:
            fields = trailer.decode().rstrip("\n").split(" ")[1:]
            if len(fields) == 3 and fields[0].isdigit():
                rc, before, after = fields
                oom = before.isdigit() and after.isdigit() and int(after) > int(before)
                return int(rc), oom
        code, deadline = None, time.monotonic() + 1.0
        with contextlib.suppress(*DockerErrors):
            while time.monotonic() < deadline:
                info = self._api.exec_inspect(exec_id)
                if not info.get("Running"):
                    code = info.get("ExitCode")
                    break
                time.sleep(0.05)
        return (137 if overran or code is None else int(code)), False

    def _kill_exec(self, mark: str) -> None:
        """Kill every process of one command (it overran, or its wrapper died); if even that
        fails, kill the whole sandbox and raise SandboxError."""
        try:
            kill_id = self._api.exec_create(self.container_id, ["bash", "-c", KILL_SCRIPT],
                                            user=self._args["user"], environment={"MARK": mark})
            self._api.exec_start(kill_id["Id"])
            if self._api.exec_inspect(kill_id["Id"]).get("ExitCode") == 0:
                return
            problem: object = "the kill command failed"
        except DockerErrors as exc:
            problem = exc
        self._broken = f"a command overran its deadline and could not be stopped ({problem})"
        with contextlib.suppress(*DockerErrors):
            self._api.kill(self.container_id)
        raise SandboxError(f"{self._broken}; the sandbox was killed")

    def _check_usable(self) -> None:
        if self.closed:
            raise SandboxError("sandbox is closed")
        if self._broken:
            raise SandboxError(f"sandbox is unusable: {self._broken}")

    def _failure(self, what: str, exc: BaseException) -> SandboxError:
        try:
            state = self._api.inspect_container(self.container_id)["State"]
        except DockerErrors:
            return SandboxError(f"{what}: {exc} (the container is gone)")
        if not state.get("Running"):
            self._broken = (f"container exited (status {state.get('Status')}, exit code "
                            f"{state.get('ExitCode')}, OOMKilled={state.get('OOMKilled')}; "
                            f"lifetime_sec={self.spec.lifetime_sec})")
            return SandboxError(f"{what}: {self._broken}")
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
        sandbox = DockerSandbox(self, container_id, spec, args, image)
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
        return {"id": data.get("Id"), "digest": digests[0] if digests else None}

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
        return self._remove(found)

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
