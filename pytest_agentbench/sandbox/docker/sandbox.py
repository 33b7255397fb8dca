"""One Docker sandbox: a long-lived container whose commands run by docker exec.

One command at a time per sandbox (a lock): when it ends, every process of the command user in
the container is killed. docker-py's exec has no timeout, so every command runs under
docker.policy.WRAPPER (`timeout -k 2`) and the host waits at most `timeout + HOST_GRACE_SEC`
before killing the command's processes itself. The exit status is the wrapper's: from its trailer
when the wrapper ran under the image's execute-only shell (the trailer carries a nonce the command
cannot read, and the wrapper writes it after every process of the command is gone), otherwise, and
whenever the trailer is missing or the host killed the wrapper, as the engine saw it
(exec_inspect). Nothing the command prints can decide it, and a killed wrapper reads as 128+n.
A container that stopped while the engine answers raises SandboxExited, an unreachable engine a
plain SandboxError. The factory that opens these is in sandbox/docker/factory.py.

Under the execute-only shell the wrapper is held open (sandbox/docker/held_shell.py says when a
command runs in an exec of its own instead); AGENTBENCH_HOLD_SHELL=0 turns that off.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import posixpath
import secrets
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

import docker

import pytest_agentbench.sandbox.disk as disk
import pytest_agentbench.sandbox.docker.exec_lines as exec_lines
import pytest_agentbench.sandbox.docker.exec_stream as exec_stream
import pytest_agentbench.sandbox.docker.one_shot as one_shot
import pytest_agentbench.sandbox.docker.policy as policy
from pytest_agentbench.paths.files import Files
from pytest_agentbench.paths.host_files import HostFiles
from pytest_agentbench.sandbox.capture import (
    CAPTURE_CAP,
    FACTS_SCRIPT,
    FULL_CAPTURE_CAP,
    KILL_GRACE_SEC,
    OutputBuffer,
    build_result,
    parse_facts,
)
from pytest_agentbench.sandbox.disk import DiskGuard
from pytest_agentbench.sandbox.docker.attach import DockerChannel
from pytest_agentbench.sandbox.docker.container_files import ContainerFiles
from pytest_agentbench.sandbox.docker.container_state import ContainerState
from pytest_agentbench.sandbox.docker.containers import DockerErrors, remove_container
from pytest_agentbench.sandbox.docker.held_shell import HeldShell, request_bytes, takes
from pytest_agentbench.sandbox.docker.shipped_mounts import ShippedMounts
from pytest_agentbench.sandbox.port import ExecResult, SandboxError, SandboxSpec

HOST_GRACE_SEC = 5.0
HELD_GO_SEC = 3.0  # the held shell takes a request at once unless stopped (held_shell.py)
LOST_OUTPUT_NOTE = ("\nagentbench: the Docker engine delivered none of this command's output (a "
                    "known engine fault); its exit status is the engine's\n")


class ContainerHost(Protocol):
    """What a DockerSandbox needs from the factory that opened it (DockerSandboxFactory)."""

    os_facts_cache: dict[str, dict[str, str]]  # image id -> OS facts, probed once per image
    private_shells: dict[str, bool]  # image|shell|user -> the label's shell is execute-only

    @property
    def client(self) -> docker.DockerClient: ...
    def disk_mode(self, spec: SandboxSpec) -> str: ...
    def engine_facts(self) -> dict[str, Any]: ...
    def loopfs_problem(self) -> str | None: ...
    def forget(self, container_id: str) -> None: ...


class DockerSandbox(ContainerState):
    def __init__(self, factory: ContainerHost, container_id: str, spec: SandboxSpec,
                 args: dict[str, Any], image: dict[str, Any], user: tuple[int, int],
                 shipped: ShippedMounts | None = None) -> None:
        self.spec = spec
        self.container_id = container_id
        self.uid, self.gid = user
        self.user = f"{self.uid}:{self.gid}"  # every exec; the container's own user is root
        self.shipped = shipped  # the volumes standing in for the host directories, if any
        if shipped is None:
            owner_uid = self.uid if os.geteuid() == 0 else None
            self.files: Files = HostFiles(spec.workspace, owner_uid=owner_uid)
        else:
            self.files = ContainerFiles(self._file_op, spec.workdir)
        self._factory = factory
        self._api = factory.client.api
        self.disk = DiskGuard(spec.workspace, spec.disk_limit_mb, factory.disk_mode(spec),
                              measure=self._measure_workspace)
        self._args = args
        self._image = image
        # the image's execute-only shell, once checked to be one (`_check_shell`); until then
        # and otherwise a plain bash, whose wrapper the command can read
        self._shell, self._private_shell = "bash", False
        self._shell_checked = not image.get("shell")
        self._os_facts: dict[str, str] | None = None
        self._broken: SandboxError | None = None
        self._lock = threading.Lock()
        self.closed = False
        # the wrapper shell held open for the next command (sandbox/docker/held_shell.py)
        self.hold_shell = os.environ.get("AGENTBENCH_HOLD_SHELL", "1") != "0"
        self._held: HeldShell | None = None
        self._held_misses = 0  # held shells that could not start or refused a request

    # -- exec ---------------------------------------------------------------------------------
    def exec(
        self, command: str, *, timeout_sec: float, env: Mapping[str, str] | None = None,
        cwd: str | None = None, full_output: bool = False, collect_file: str | None = None,
        epilogue: str | None = None, prologue: str | None = None, inline_scripts: bool = False,
    ) -> ExecResult:
        """Run one command; concurrent calls wait their turn (see the module docstring).
        `collect_file`, `epilogue`, `prologue`, `inline_scripts`: see port.EpilogueRunning."""
        with self._lock:
            self._check_usable()
            if not self._shell_checked:
                self._check_shell(str(self._image["shell"]))
            return self._exec(command, max(float(timeout_sec), 0.001), env, cwd,
                              full_output or self.spec.full_logs, collect_file, epilogue,
                              prologue, inline_scripts)

    collects_files = runs_epilogues = runs_prologues = True  # port.EpilogueRunning

    epilogues_read = property(lambda self: self._private_shell)  # only its lines are read

    def _file_op(self, command: str, env: dict[str, str], timeout: float) -> ExecResult:
        """One ContainerFiles operation: a command like any other (the lock, the wrapper)."""
        return self.exec(command, timeout_sec=timeout, env=env, full_output=True)

    sees_host_files = property(lambda self: self.shipped is None)

    def attach(self, argv: list[str], *, env: Mapping[str, str] | None = None) -> DockerChannel:
        """See sandbox.port.Attaching: `argv` started by an exec of its own as the container's
        user (KEEPER_USER; out of reach of the command user's `kill -1` and /proc), its
        stdin and stdout held open through the engine's API (sandbox/docker/attach.py)."""
        self._check_usable()
        try:
            exec_id = self._api.exec_create(
                self.container_id, argv, user=policy.KEEPER_USER, workdir="/", stdin=True,
                stdout=True, stderr=True, environment=dict(env or {}))["Id"]
            return DockerChannel(exec_stream.start(self._api, exec_id), exec_id)
        except DockerErrors as exc:
            raise self._failure("cannot start a process held open", exc) from exc

    def _exec(self, command: str, budget: float, env: Mapping[str, str] | None,
              cwd: str | None, full: bool, collect_file: str | None = None,
              epilogue: str | None = None, prologue: str | None = None,
              inline: bool = False, hold: bool = True) -> ExecResult:
        nonce = secrets.token_hex(16)
        args = [f"{budget:.3f}", command, self.disk.fsize_kib,
                self.spec.workdir if self.disk.measures else "", collect_file or "",
                epilogue or "", prologue or "", "1" if inline else ""]
        workdir = posixpath.normpath(posixpath.join(self.spec.workdir, cwd or "."))
        cap = FULL_CAPTURE_CAP if full else CAPTURE_CAP
        out, err = OutputBuffer(cap), OutputBuffer(cap)
        held = self._held_shell(env or {}, args) if hold else None
        self.disk.start()
        start = time.monotonic()
        errors: list[BaseException] = []
        outcome: list[str] = []  # the held shell's (HeldShell.exchange)
        stream: exec_stream.ExecStream | None = None
        if held is not None:
            exec_id = held.exec_id
            held.went.clear()
            reader = threading.Thread(target=held.exchange, daemon=True, args=(
                request_bytes(nonce, args, workdir, env or {}), nonce, out, err, errors, outcome))
        else:
            self._drop_held()  # the wrapper's first reap would end it
            try:
                exec_id = self._api.exec_create(
                    self.container_id, [self._shell, "-p", "-c", policy.WRAPPER, "agentbench",
                                        *args], user=self.user, workdir=workdir,
                    environment={**(env or {}), policy.NONCE_VAR: nonce})["Id"]
                stream = self._open_stream(exec_id)
            except DockerErrors as exc:
                raise self._failure("cannot start a command", exc) from exc
            reader = threading.Thread(target=exec_stream.drain, args=(stream, out, err, errors),
                                      daemon=True)
        grace = (HOST_GRACE_SEC + (policy.EPILOGUE_MAX_SEC + 2 if epilogue else 0)
                 + (policy.PROLOGUE_MAX_SEC + 2 if prologue else 0))
        try:
            reader.start()
            if held is not None and not held.went.wait(min(HELD_GO_SEC, budget + grace)) \
                    and reader.is_alive():  # not taken yet: a stopped shell goes on (SIGCONT)
                one_shot.wake_user(self._api, self.container_id, self._shell, self.user)
            overran, disk_hit = self._wait(reader, start + budget + grace)
            if overran or disk_hit:
                self._reap("it overran its deadline" if overran else "it exceeded the disk limit")
                reader.join(KILL_GRACE_SEC + 1)
        finally:
            if stream is not None:
                stream.close()  # ends the reader if it still waits
            elif outcome != ["done"]:
                self._drop_held()  # the same
            if reader.ident is not None:  # started
                reader.join(1.0)
        if outcome and outcome[0] in ("refused", "unsent") and not (overran or disk_hit):
            self._held_misses += 1  # nothing ran: the request goes to an exec of its own
            return self._exec(command, budget, env, cwd, full, collect_file, epilogue, prologue,
                              inline, hold=False)
        if errors and not (overran or disk_hit):
            raise self._failure("lost the command's output stream", errors[0])
        elapsed = time.monotonic() - start
        trailer = err.pop_trailer(policy.TRAILER + nonce.encode())
        seen = policy.parse_trailer(trailer, nonce)
        # the trailer and the lines before it only when the wrapper alone can have written them:
        # the nonce is secret under the execute-only shell (a readable wrapper's can be stolen),
        # and the host did not kill it; else the engine's status, the caller reads the file
        trusted = seen is not None and self._private_shell and not (overran or disk_hit)
        collected = exec_lines.collected(err, nonce) if collect_file and trusted else None
        after = exec_lines.epilogue_output(err, nonce) if epilogue and trusted else None
        exit_code = (seen[0] if trusted and seen is not None
                     else exec_stream.exit_code(self._api, exec_id))
        if seen is None and not (overran or disk_hit):
            self._reap("its wrapper was killed")  # its processes may still run
        if exit_code is None:
            raise self._failure("cannot read the command's exit status",
                                TimeoutError("exec_inspect never reported an exit code"))
        # no trailer, yet the wrapper was not killed (that is 137): the engine lost the stream
        lost = seen is None and not (overran or disk_hit) and exit_code != 137
        if lost:
            err.append(LOST_OUTPUT_NOTE.encode())
        # the command's own time (not its wrapper's scripts') when the wrapper says, else the exec's
        own = seen[2] if trusted and seen is not None and seen[2] is not None else elapsed
        timed_out = overran or (exit_code in (124, 137) and own >= budget - 0.02)  # 10 ms ticks
        # also the baseline of the next command
        disk_after = self.disk.hit_after(exit_code, disk.trailer_usage(trailer) if seen else None)
        if disk_hit or disk_after:
            err.append(self.disk.message(killed=disk_hit).encode())
        oom = seen is not None and seen[1] and not timed_out
        result = build_result(
            exit_code, out, err, int(elapsed * 1000), timed_out=timed_out, oom_killed=oom,
            full_logs=full, disk_limit_exceeded=disk_hit or disk_after, output_lost=lost)
        if collected is not None:
            result = dataclasses.replace(result, file_read=collected[0],
                                         file_content=collected[1])
        return result if after is None else dataclasses.replace(result, epilogue_output=after)

    def _check_shell(self, shell: str) -> None:
        """The image's label names an execute-only shell: it is taken only if the command user
        can neither read nor write it and root owns it (an image may label any file so), once
        per image, shell and user for the factory's life. Anything else, or no answer: bash."""
        key = f"{self._image.get('id') or self.spec.image}|{shell}|{self.user}"
        private = self._factory.private_shells.get(key)
        if private is None:
            try:
                private = one_shot.shell_is_private(self._api, self.container_id, shell,
                                                    self.user)
            except DockerErrors as exc:
                raise self._failure("cannot check the image's shell", exc) from exc
            self._factory.private_shells[key] = private
        self._shell_checked = True
        if private:
            self._shell, self._private_shell = shell, True

    def _open_stream(self, exec_id: str) -> exec_stream.ExecStream:
        """A command's started exec (a seam: tests/docker/test_lost_exec_output.py drops it)."""
        return exec_stream.start(self._api, exec_id)

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

    def _measure_workspace(self) -> str | None:
        """The workspace's size measured in the container (disk.MEASURE_SCRIPT, as the command
        user): the field DiskGuard reads, None when it cannot be had."""
        try:
            return one_shot.workspace_usage(self._api, self.container_id, self._shell,
                                            self.user, self.spec.workdir)
        except DockerErrors:
            return None

    def hold(self) -> None:
        """Start the held wrapper shell before the first command (scoring's sandbox opens ahead)."""
        with self._lock, contextlib.suppress(SandboxError):
            self._check_usable()
            if not self._shell_checked:
                self._check_shell(str(self._image["shell"]))
            self._held_shell({}, [])

    def _held_shell(self, env: Mapping[str, str], args: list[str]) -> HeldShell | None:
        """The held shell, started if need be; None: an exec of its own (no execute-only shell, a
        request the held shell does not take, or held shells that did not work here three times)."""
        if not (self.hold_shell and self._private_shell and self._held_misses < 3
                and takes(env, args)):
            return None
        if self._held is None:
            self._held = HeldShell.start(self._api, self.container_id, self._shell, self.user)
            self._held_misses += self._held is None
        return self._held

    def _drop_held(self) -> None:  # the held shell ends at its stdin's end, or was killed
        held, self._held = self._held, None
        if held is not None:
            held.close()

    def _reap(self, why: str) -> None:
        """Kill every process of the command user in the container, from a fresh exec; if that
        fails, the sandbox is killed and SandboxExited (or SandboxError) raised. The held shell, a
        process of that user, ends too; its stream is closed after the kill."""
        try:
            self._kill_user(why)
        finally:
            self._drop_held()


    # -- facts and lifecycle --------------------------------------------------------------------
    def facts(self) -> dict[str, Any]:
        if not self._shell_checked:  # what `private_shell` says below is the checked answer
            with self._lock:
                self._check_usable()
                self._check_shell(str(self._image["shell"]))
        if self._os_facts is None:
            # The probe costs ~1 s (python, pip, pytest start-ups); the image decides its answer.
            key = str(self._image.get("id") or self.spec.image)
            cached = self._factory.os_facts_cache.get(key)
            if cached is None:
                probe = self.exec(FACTS_SCRIPT, timeout_sec=60)
                cached = self._factory.os_facts_cache[key] = parse_facts(probe.stdout)
            self._os_facts = cached
        return {
            "sandbox": "docker", "isolation": "container", "image": self.spec.image,
            "image_id": self._image.get("id"), "repo_digest": self._image.get("digest"),
            "container_id": self.container_id, "engine": self._factory.engine_facts(),
            "create_args": policy.sanitized(self._args, self.spec,
                                            self.shipped.roles if self.shipped else None),
            "os": dict(self._os_facts),
            "transfer": "bind" if self.shipped is None else "archive",
            "exec_user": self.user, "private_shell": self._private_shell,
            "disk_limit": {"mb": self.spec.disk_limit_mb, "enforced": self.disk.mode,
                           "filesystem_unavailable": self._factory.loopfs_problem()
                           if self.disk.mode == "watched" or self.shipped else None},
        }

    def close(self) -> None:
        """Remove the container. With shipped volumes, first copy the writable directories back
        to the host (unless the spec says nothing after needs them), then remove the volumes; a
        failed copy raises SandboxError after everything was removed."""
        if self.closed:
            return
        self.closed = True
        self._drop_held()
        self._factory.forget(self.container_id)
        failure: SandboxError | None = None
        if self.shipped is not None and self.spec.sync_back:
            with self._lock:
                try:
                    self.shipped.sync_back(self.container_id)
                except SandboxError as exc:
                    failure = exc
        try:
            remove_container(self._api, self.container_id)
        finally:
            if self.shipped is not None:
                with contextlib.suppress(SandboxError):
                    self.shipped.remove()
        if failure is not None:
            raise failure

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
