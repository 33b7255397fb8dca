"""The harness work a local sandbox does around a command, in the command's exec
(port.EpilogueRunning), as the Docker wrapper does it (sandbox/docker/policy.py PROLOGUE, EPILOGUE
and COLLECT), so that the recording toolbox, the baseline and scoring take one path on both:

- a prologue script runs first, in a process group of its own, bounded by SCRIPT_MAX_SEC (or,
  `inline`, by the command's budget and that together, as the Docker wrapper's inline scripts
  are by the exec's deadline: one cut short then makes the result `timed_out`, as there). Its
  stdout, trailing newlines dropped, goes first on the command's stdout as one block
  (port.PROLOGUE_MARK, its length and its time in microseconds). When it failed or said more
  than port.PROLOGUE_MAX_BLOCK, a deferral goes there instead (with its output after its fourth
  line when it exited 0) and neither the command nor the epilogue runs;
- the command runs without the scripts' AGENTBENCH_EXCL_* variables;
- an epilogue script runs after the command and its process group are gone, with
  AGENTBENCH_CHAIN: the time the command started, the prologue's first line and its lines after
  the third; its stdout is the result's `epilogue_output` when it exited 0 (and fits
  EPILOGUE_MAX_BYTES);
- a file named by the caller is read back last: nothing there, or a symlink, reads as no file;
  an unreadable one, or one over COLLECT_MAX_BYTES, as not read (the caller reads it itself).

Nothing here is a boundary (the local sandbox runs everything as the harness's own user); it
keeps the protocol the same, the block first and whole where the command cannot write into it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_agentbench.sandbox.port import (
    COLLECT_MAX_BYTES,
    EPILOGUE_MAX_BYTES,
    PROLOGUE_MARK,
    PROLOGUE_MAX_BLOCK,
    SandboxError,
)
from pytest_agentbench.sandbox.port import SCRIPT_MAX_SEC as SCRIPT_MAX_SEC  # tests lower it

SCRIPT_VARS = "AGENTBENCH_EXCL_"  # the scripts' environment, hidden from the command


@dataclass(frozen=True)
class Prologue:
    head: str  # what goes first on the command's stdout
    chain: str  # what of it the epilogue gets (before the command's start time), "" for none
    deferred: bool  # the command and the epilogue do not run
    overran: bool = False  # cut short by its bound


def command_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the scripts' own variables."""
    return {k: v for k, v in env.items() if not k.startswith(SCRIPT_VARS)}


def run_prologue(script: str, cwd: Path, env: Mapping[str, str],
                 bound: float = SCRIPT_MAX_SEC) -> Prologue:
    started = time.monotonic()
    code, out, overran = _run(script, cwd, env, bound)
    micros = int((time.monotonic() - started) * 1_000_000)
    block = out.rstrip("\n")
    lines = block.split("\n")
    if code == 0 and len(block) <= PROLOGUE_MAX_BLOCK:
        chain = "\n".join([lines[0], *lines[3:]]) if block else ""
        return Prologue(f"{PROLOGUE_MARK}{len(block)} {micros}\n{block}\n", chain, False)
    rest = "\n".join(lines[4:]) if code == 0 else ""
    return Prologue(f"{PROLOGUE_MARK}defer {code} {micros}\n{rest}\n", "", True, overran)


def chain_for(prologue: Prologue | None) -> str:
    """AGENTBENCH_CHAIN for the epilogue, taken as the command starts."""
    if prologue is None or not prologue.chain:
        return ""
    return f"{time.time():.6f}\n{prologue.chain}"


def run_epilogue(script: str, cwd: Path, env: Mapping[str, str], chain: str,
                 bound: float = SCRIPT_MAX_SEC) -> str | None:
    code, out, _ = _run(script, cwd, {**env, "AGENTBENCH_CHAIN": chain}, bound)
    if code != 0 or len(out.encode("utf-8", "surrogateescape")) > EPILOGUE_MAX_BYTES:
        return None
    return out


def collect(path: Path) -> tuple[bool, bytes | None]:
    """(read, its bytes; None: no regular file there), as port.ExecResult.file_read says."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return True, None
    except OSError:
        return False, None
    if not stat.S_ISREG(info.st_mode):
        return True, None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(COLLECT_MAX_BYTES + 1)
    except OSError:
        return False, None
    return (True, data) if len(data) <= COLLECT_MAX_BYTES else (False, None)


def _run(script: str, cwd: Path, env: Mapping[str, str], bound: float) -> tuple[int, str, bool]:
    """`bash -c script`: its exit status (124 when it overran `bound` seconds), its stdout and
    whether it overran; its stdin empty, its stderr dropped, its process group killed after it.
    SandboxError when it cannot start (its directory gone, say), as a command's own start."""
    try:
        proc = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=dict(env),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        raise SandboxError(f"cannot start bash: {exc}") from exc
    try:
        out, _ = proc.communicate(timeout=max(bound, 0.001))
        code = proc.returncode
    except subprocess.TimeoutExpired:
        killpg(proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=2)
        proc.kill()
        proc.wait()
        return 124, "", True
    finally:
        killpg(proc.pid)
    return (code if code >= 0 else 128 - code), out.decode("utf-8", "replace"), False


def killpg(pgid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    """Signal a process group that may be gone already."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
