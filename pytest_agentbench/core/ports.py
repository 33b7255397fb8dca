"""Ports: the small interfaces the core talks through. Adapters (Docker, httpx) implement them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

Phase = Literal["setup", "agent"]


class SandboxError(Exception):
    """The sandbox itself failed (engine down, container died): maps to SANDBOX_ERROR."""


@dataclass
class ExecResult:
    """One command's outcome. `exit_code` is the command's own; on timeout it is 124 or 137."""

    exit_code: int
    stdout: str
    stderr: str
    duration_ms: int
    timed_out: bool = False
    oom_killed: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_total_lines: int = 0
    stderr_total_lines: int = 0
    kept_head_lines: int = 0
    kept_tail_lines: int = 0
    full_stdout: str | None = None  # only when full logs were asked for
    full_stderr: str | None = None

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
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
            "stdout_total_lines": self.stdout_total_lines,
            "stderr_total_lines": self.stderr_total_lines,
        }


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


class PathEscape(Exception):
    """A path leaves the workspace (`..`, absolute, or a symlink pointing outside)."""


class Files(Protocol):
    """File access confined to the workspace. Paths are relative to the workspace root; no
    component may be a symlink that leaves it. Implemented in core/workspace.py (host side)."""

    def read_bytes(self, path: str, max_bytes: int | None = None) -> bytes: ...
    def write_bytes(self, path: str, data: bytes) -> None: ...
    def remove(self, path: str) -> None: ...
    def exists(self, path: str) -> bool: ...
    def list(self, root: str = ".", glob: str | None = None, limit: int = 1000) -> list[str]: ...


class Sandbox(Protocol):
    """An isolated place to run commands against a workspace."""

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


class SandboxFactory(Protocol):
    def open(self, spec: SandboxSpec) -> Sandbox: ...

    def sweep(self, labels: Mapping[str, str]) -> int:
        """Remove every sandbox carrying these labels; returns how many were removed."""
        ...
