"""Ports: the small interfaces the core talks through. Adapters (Docker, httpx) implement them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pytest_agentbench.paths.files import Files

Phase = Literal["setup", "agent"]


class SandboxError(Exception):
    """The sandbox itself failed (engine down, container gone): maps to SANDBOX_ERROR."""


class EngineLost(SandboxError):
    """The engine itself stopped answering (not only the sandbox): SANDBOX_ERROR/ENGINE_LOST,
    an attempt another engine may retry (`--agentbench-retry-infra`)."""


class SandboxExited(SandboxError):
    """The sandbox stopped while the engine still answers: its container is no longer running.

    Raised by `exec` (and anything built on it) instead of a plain SandboxError, so the core can
    tell a sandbox that something inside took down (an agent's command: the agent's failure)
    from an engine that went away (infrastructure). `expired` is the dead-man's switch: PID 1
    ran out its lifetime and exited 0 on its own, which no command can cause.
    """

    def __init__(self, message: str, *, exit_code: int | None = None,
                 oom_killed: bool = False, status: str | None = None) -> None:
        super().__init__(message)
        self.exit_code, self.oom_killed, self.status = exit_code, oom_killed, status

    @property
    def expired(self) -> bool:
        return self.exit_code == 0 and not self.oom_killed


SESSION_LABEL = "agentbench.session"  # a sandbox's label: the pytest session that made it


@dataclass
class ExecResult:
    """One command's outcome. `exit_code` is the command's own, as the sandbox observed it (never
    text the command printed); on timeout it is 124 or 137. `disk_limit_exceeded`: the workspace
    hit `SandboxSpec.disk_limit_mb` during the command (its writes failed or it was killed)."""

    exit_code: int
    stdout: str
    stderr: str
    duration_ms: int
    timed_out: bool = False
    oom_killed: bool = False
    disk_limit_exceeded: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_total_lines: int = 0
    stderr_total_lines: int = 0
    kept_head_lines: int = 0
    kept_tail_lines: int = 0
    full_stdout: str | None = None  # only when full logs were asked for
    full_stderr: str | None = None
    # The engine ran the command (its exit status is known) but delivered none of its output:
    # an engine may drop a short exec's stream (moby/moby#27289; docker-py's own way of losing
    # it, docker/docker-py#3332, is avoided: sandbox/docker/exec_stream.py). Callers
    # that need the output and may safely run the command again do so once.
    output_lost: bool = False
    # A sandbox that `collects_files` was asked for a file with the command (`collect_file`):
    # `file_read` when it read it after the command and everything it started had ended, as a
    # command of its own would (then `file_content` is its bytes, None: no regular file there).
    # Not read (too large, unreadable, the output lost): the caller reads it itself.
    file_read: bool = False
    file_content: bytes | None = None
    # A sandbox that `runs_epilogues` was given a script with the command (`epilogue`): its stdout
    # when it ran after the command and everything it started had ended, exited 0 and was read
    # back; None otherwise (the caller runs the script itself).
    epilogue_output: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def summary(self) -> dict[str, Any]:
        """The record-friendly view: everything but the text."""
        return {
            "exit_code": self.exit_code,
            "duration_ms": self.duration_ms,
            "timed_out": self.timed_out,
            "oom_killed": self.oom_killed,
            "disk_limit_exceeded": self.disk_limit_exceeded,
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
            "stdout_total_lines": self.stdout_total_lines,
            "stderr_total_lines": self.stderr_total_lines,
        }


@dataclass(frozen=True)
class ExtraMount:
    """A host directory the sandbox sees read-only at `target`; its commands find where in
    the environment variable `env` (the target in a container, the host path in the local
    sandbox). A command agent's gateway socket and installed program come this way. On an
    engine that cannot see this host's files the sandbox gets a copy made when it opens, owned
    by root and read-only (a socket in it is not copied: see Attaching)."""

    host: Path
    target: str
    env: str
    # the directory's content never changes under this key (an installed program): an engine
    # that copies it may keep the copy for later sandboxes
    cache_key: str | None = None


@dataclass
class SandboxSpec:
    """What a sandbox needs to start: the workspace and env dirs on the host, limits, network."""

    image: str
    workspace: Path  # host directory mounted at `workdir`
    env_dir: Path  # host directory mounted at /env (setup installs land here)
    env_read_only: bool = False  # after setup, /env must not be writable (no agent poisoning)
    workdir: str = "/workspace"
    network: bool = False
    cpu_limit: float = 2.0
    mem_limit_mb: int = 4096
    pids_limit: int = 512
    lifetime_sec: float = 3600.0  # dead-man's switch: PID 1 exits after this
    labels: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    ca_bundle: Path | None = None  # host CA bundle mounted read-only (TLS-intercepting proxies)
    pip_cache: Path | None = None  # host dir for a persistent pip cache
    full_logs: bool = False
    disk_limit_mb: int | None = None  # size limit of `workspace`; see SandboxFactory.provision
    # what the sandbox changed in `workspace` (and a writable `env_dir`) must be in the host
    # directories after close: False when nothing reads them after (an engine that does not
    # share our filesystem then skips copying them back)
    sync_back: bool = True
    extra_mounts: tuple[ExtraMount, ...] = ()


class Channel(Protocol):
    """A process in a sandbox, attached: bytes to its stdin, bytes from its stdout (its stderr
    kept apart, the last few KiB). `recv` returns b"" once its stdout ended; `close` ends the
    attachment, which ends its stdin, and wakes a `recv` waiting in another thread."""

    def recv(self, size: int) -> bytes: ...

    def sendall(self, data: bytes) -> None: ...

    def close(self) -> None: ...

    def stderr_tail(self) -> str: ...


@runtime_checkable
class Attaching(Protocol):
    """A sandbox that can start a process held open by the harness, outside the one-command-at-
    a-time `exec` and beside it: how a command agent's model relay works on an engine that cannot
    see this host's files (`sees_host_files` False: an ExtraMount there is a copy, a Unix socket
    in it reaches nothing). The process runs as the container's own user, out of reach of the
    command user's processes; it ends when the channel closes or the sandbox does."""

    sees_host_files: bool

    def attach(self, argv: list[str], *, env: Mapping[str, str] | None = None) -> Channel: ...


class Sandbox(Protocol):
    """An isolated place to run commands against a workspace.

    One command at a time: `exec` is serialized per sandbox (concurrent calls wait), because
    when a command ends every process it started is killed, whatever it did to escape. Raises
    SandboxExited when the sandbox is no longer running, SandboxError when it cannot be reached.
    """

    spec: SandboxSpec
    files: Files

    def exec(
        self,
        command: str,
        *,
        timeout_sec: float,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        full_output: bool = False,  # no truncation (diffs); still capped at FULL_CAPTURE_CAP
    ) -> ExecResult: ...

    def facts(self) -> dict[str, Any]:
        """Image id/digest, run arguments, OS facts: recorded in meta/environment.json."""
        ...

    def close(self) -> None: ...


# A prologue's block at the head of a command's stdout (EpilogueRunning): the mark, the block's
# length in characters and its time in microseconds, a newline, the block, a newline; or the
# mark, "defer", the script's exit status and time, a newline, what it left to say, a newline.
PROLOGUE_MARK = "\x1eagentbench-fold:"
PROLOGUE_MAX_BLOCK = 12_000  # characters (ASCII); a larger block defers (the head stays whole)
SCRIPT_MAX_SEC = 20  # a prologue's or an epilogue's own bound, when not inline
EPILOGUE_MAX_BYTES = 256 * 1024  # an epilogue's output that comes back (a larger one: None)
COLLECT_MAX_BYTES = 1024 * 1024  # a file read back after the command (a larger one: not read)


class EpilogueRunning(Protocol):
    """A sandbox whose exec can do harness work around the command, in the same exec: read a
    file back (its `collects_files` is True: see ExecResult.file_read) and run a harness script
    (its `runs_epilogues` is True: see ExecResult.epilogue_output), once the command and
    everything it started are gone; and run a harness script before the command (`prologue`,
    when its `runs_prologues` is True), after every earlier process is gone: its stdout comes
    first on the command's stdout as one block (PROLOGUE_MARK), and when it fails or says too
    much, a deferral comes instead and neither the command nor the epilogue runs. The first line
    of the prologue's output and what follows its third line reach the epilogue alone, as
    AGENTBENCH_CHAIN. `inline_scripts`: the two are the harness's own short scripts, bounded by
    the exec's deadline rather than their own (no process started for them). One exec instead of
    two, each."""

    collects_files: bool
    runs_epilogues: bool
    runs_prologues: bool
    epilogues_read: bool  # False: an epilogue's output never comes back (don't run one for it)

    def exec(
        self, command: str, *, timeout_sec: float, env: Mapping[str, str] | None = None,
        cwd: str | None = None, full_output: bool = False, collect_file: str | None = None,
        epilogue: str | None = None, prologue: str | None = None, inline_scripts: bool = False,
    ) -> ExecResult: ...


class SandboxFactory(Protocol):
    def open(self, spec: SandboxSpec) -> Sandbox: ...

    def provision(self, path: Path, disk_limit_mb: int | None) -> str:
        """Make `path` an empty directory whose size is bounded by `disk_limit_mb`, before
        anything is put in it (a checkout, a copy); sandboxes opened on it enforce the bound.
        Returns how: "filesystem" (a hard bound), "watched" or "measured" (soft ones: the host,
        or on an archive engine the sandbox, measures the workspace), or "none". Call
        `release(path)` when done with it."""
        ...

    def provision_from(self, path: Path, disk_limit_mb: int | None, base: Path) -> tuple[str, str]:
        """`provision`, then `path` starts as a writable view of the directory `base` that never
        changes `base` (an environment-cache entry): ("filesystem" | "watched" | "none", "overlay"
        (copy-on-write, no copy made) | "copy"). `release(path)` when done with it."""
        ...

    # True when a sandbox cannot write to an `env_read_only` env dir whatever it runs, so a
    # cache entry's env dir may be mounted as it is; False: give each attempt a copy.
    read_only_mounts: bool

    def release(self, path: Path, keep: bool = False) -> None:
        """Undo `provision` once no sandbox uses `path`. keep=True: the content stays in `path`
        (a plain directory again); otherwise it may be discarded (the caller removes `path`).
        Safe on a path that was never provisioned, and to call twice."""
        ...

    def sweep(self, labels: Mapping[str, str]) -> int:
        """Remove every sandbox carrying these labels; returns how many were removed."""
        ...
