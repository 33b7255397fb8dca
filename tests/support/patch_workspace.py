"""What the patch applier's tests share (tests/unit/patching/): ten numbered lines and the
workspace's file access."""

from __future__ import annotations

from pathlib import Path

from pytest_agentbench.paths.host_files import HostFiles

TEN = "".join(f"line {i}\n" for i in range(1, 11))


def files(root: Path) -> HostFiles:
    return HostFiles(root)
