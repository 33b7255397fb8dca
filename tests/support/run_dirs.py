"""The run directories under an output root (not its `latest` link), and `PytestRun`: a
`python -m pytest` subprocess of a test, with its output root and log."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def run_dirs(out: Path) -> list[Path]:
    """Every run directory in `out`, sorted by name; the `latest` link is not one."""
    if not out.is_dir():
        return []
    return sorted(p for p in out.iterdir() if p.is_dir() and not p.is_symlink())


@dataclass
class PytestRun:
    """A run started as a subprocess in a session of its own (every process findable)."""

    proc: subprocess.Popen[bytes]
    out: Path
    log: Path

    @property
    def run_dir(self) -> Path:
        dirs = run_dirs(self.out)
        assert len(dirs) == 1, (dirs, self.text()[-3000:])
        return dirs[0]

    def records(self) -> list[dict[str, Any]]:
        """Every record of attempts.jsonl, each checked whole and valid."""
        from pytest_agentbench.schemas.records import AttemptRecord

        path = self.run_dir / "attempts.jsonl"
        lines = path.read_text("utf-8").splitlines() if path.exists() else []
        for line in lines:
            AttemptRecord.model_validate_json(line)
        return [json.loads(line) for line in lines]

    def text(self) -> str:
        return self.log.read_text("utf-8", "replace") if self.log.exists() else ""

    def wait_until(self, what: str, condition: Callable[[], bool], timeout: float) -> None:
        """Poll `condition` until it holds; an AssertionError with the log's tail when the run
        ends first or `timeout` seconds pass."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"gave up waiting for {what}:\n{self.text()[-4000:]}")
            time.sleep(0.2)

    def wait(self, timeout: float = 900) -> int:
        """Its exit status; whatever of its session is left is killed after."""
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.kill()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
