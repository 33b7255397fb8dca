"""A step's snapshot folded into a command's exec, on a sandbox that runs the harness's scripts
around a command (port.EpilogueRunning: the Docker wrapper's prologue and epilogue, the local
sandbox's subprocesses): `split_fold` takes the prologue's block off the head of the command's
output (RecordingToolbox._exec_around; scoring's apply, core/attempt.py).

An exec costs tens of milliseconds before anything runs on Docker, and a `run` step used two:
the command, then the snapshot. Between two execs nothing of the command user runs in the
sandbox (every command's processes are killed when it ends, and again when the next one starts),
so the workspace after step k is still the workspace when the next exec starts, as long as the
host does not write to it in between (the recording toolbox snapshots before any host-side
edit). The snapshot of step k can therefore run at the start of the next command's exec, before
the command, its block first on the output, where the command cannot write before or into it.

The fold is used only when the exec is plain: no extra environment (the agent's `env` could
change what the snapshot's tools are), no cwd, no full output, a budget of at least
FOLD_MIN_BUDGET_SEC, a command of sane size. Otherwise the pending snapshot takes its own exec
first and the command runs in a plain one after. When the block says "defer" (the command did
not run), the pending snapshot takes its own exec, then the command runs with its own snapshot
after it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pytest_agentbench.paths.files import Files
from pytest_agentbench.sandbox.port import PROLOGUE_MARK, ExecResult, Sandbox, SandboxSpec

FOLD_MIN_BUDGET_SEC = 5.0
FOLD_MAX_COMMAND = 60_000  # characters; a longer command runs in a plain exec


@dataclass(frozen=True)
class Folded:
    """What came back from a folded exec: the snapshot's block (None: deferred or cut short, and
    the command did not run), the snapshot's time, the command's own result without the block,
    and on a deferral after a snapshot that went through, the git dir's new fingerprint."""

    block: str | None
    snapshot_us: int
    result: ExecResult | None
    fingerprint: str | None = None


def split_fold(result: ExecResult) -> Folded:
    """Take the fold's block off the head of a folded exec's stdout."""
    text = result.stdout
    if not text.startswith(PROLOGUE_MARK):
        return Folded(None, 0, None)  # the prefix never printed: nothing ran
    header, _, rest = text[len(PROLOGUE_MARK):].partition("\n")
    fields = header.split(" ")
    if len(fields) == 3 and fields[0] == "defer" and fields[2].isdigit():
        fingerprint = rest.rstrip("\n") if fields[1] == "0" and not result.timed_out else None
        return Folded(None, int(fields[2]), None, fingerprint or None)
    if len(fields) != 2 or not fields[0].isdigit() or not fields[1].lstrip("-").isdigit():
        return Folded(None, 0, None)
    # a complete block means the command ran, whatever the time says (a clock stepped back)
    size, snapshot_us = int(fields[0]), max(0, int(fields[1]))
    if len(rest) < size + 1 or rest[size] != "\n":
        return Folded(None, snapshot_us, None)  # cut short: killed before the command ran
    block, cut = rest[:size], len(PROLOGUE_MARK) + len(header) + 1 + size + 1
    return Folded(block, snapshot_us, _without_head(result, cut, block.count("\n") + 2,
                                                    snapshot_us))


def _without_head(result: ExecResult, cut: int, lines: int, snapshot_us: int) -> ExecResult:
    """The command's result as if the block had never been printed."""
    stdout = result.stdout[cut:]
    if result.stdout_truncated:  # the marker counts the bytes of everything, block included
        stdout = _fix_marker(stdout, cut)
    full = result.full_stdout[cut:] if result.full_stdout is not None else None
    return replace(
        result, stdout=stdout, full_stdout=full,
        stdout_total_lines=max(0, result.stdout_total_lines - lines),
        duration_ms=max(0, result.duration_ms - snapshot_us // 1000),
    )


def _fix_marker(text: str, cut: int) -> str:
    """Subtract the block's bytes from the truncation marker's byte count."""
    at = text.find("\n[... agentbench: ")
    end = text.find(" bytes in all; truncated ...]\n", at)
    if at < 0 or end < 0:
        return text
    count = text[:end].rsplit(" ", 1)[-1]
    if not count.isdigit():
        return text
    start = end - len(count)
    return text[:start] + str(max(0, int(count) - cut)) + text[end:]


class FoldingSandbox:
    """The sandbox a recording toolbox hands its tools: `exec` first settles the pending
    snapshot through `settle(command, timeout, env, cwd, full_output)`, which may run the command
    folded. Everything else is the sandbox's own."""

    def __init__(self, inner: Sandbox, settle: Callable[..., ExecResult]) -> None:
        self.inner = inner
        self.spec: SandboxSpec = inner.spec
        self.files: Files = inner.files
        self._settle = settle

    def exec(
        self, command: str, *, timeout_sec: float, env: Mapping[str, str] | None = None,
        cwd: str | None = None, full_output: bool = False,
    ) -> ExecResult:
        return self._settle(command, timeout_sec, env, cwd, full_output)

    def facts(self) -> dict[str, Any]:
        return self.inner.facts()

    def close(self) -> None:
        self.inner.close()


def foldable(command: str, timeout_sec: float, env: Mapping[str, str] | None, cwd: str | None,
             full_output: bool) -> bool:
    """Whether an exec can carry the pending snapshot (see the module docstring)."""
    return (not env and cwd is None and not full_output and timeout_sec >= FOLD_MIN_BUDGET_SEC
            and 0 < len(command) <= FOLD_MAX_COMMAND)
