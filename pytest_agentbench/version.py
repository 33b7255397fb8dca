"""The harness version recorded in every attempt: package version plus git SHA when known."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from pytest_agentbench import __version__


@functools.cache
def harness_version() -> str:
    repo = Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--",
                                "pytest_agentbench"], capture_output=True, text=True,
                               timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        sha, dirty = "", ""
    if not sha:
        return __version__
    return f"{__version__}+g{sha}" + (".dirty" if dirty else "")
