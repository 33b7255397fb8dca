"""Per-commit packs cut from a mirror: the history of exactly one pinned commit.

Building one costs a ``git pack-objects`` run; every further workspace for that commit is a
plain file copy (much faster than ``git fetch`` from the mirror, which packs *and* re-indexes
every object each time). Only the newest ``keep`` snapshots per mirror are kept on disk.
Callers hold the mirror lock: shared to copy from a snapshot, exclusive to build or evict.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from pytest_agentbench.repos.gitcmd import run_git


def snapshot_packs(snap_dir: Path) -> list[Path]:
    """The pack and index files of a snapshot, or ``[]`` when it does not exist."""
    if not snap_dir.is_dir():
        return []
    return sorted(p for p in snap_dir.iterdir() if p.suffix in (".pack", ".idx"))


def touch(snap_dir: Path) -> None:
    """Mark a snapshot as recently used (eviction goes by mtime)."""
    os.utime(snap_dir)


def build_snapshot(mirror: Path, commit: str, snap_dir: Path, timeout: float) -> None:
    """Pack ``commit`` and its ancestors from ``mirror`` into ``snap_dir`` (atomically)."""
    snap_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = snap_dir.with_name(f".tmp-{commit}-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    try:
        run_git(
            [
                f"--git-dir={mirror}",
                "pack-objects",
                "-q",
                "--revs",
                "--delta-base-offset",
                "--",
                str(tmp / "pack"),
            ],
            timeout=timeout,
            stdin=commit + "\n",
        )
        os.rename(tmp, snap_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def evict(snapshots_root: Path, keep: int) -> None:
    """Delete all but the ``keep`` most recently used snapshots, plus stale temp dirs."""
    if not snapshots_root.is_dir():
        return
    entries = list(snapshots_root.iterdir())
    stale = [p for p in entries if p.name.startswith(".tmp-")]
    live = sorted((p for p in entries if p not in stale), key=_mtime, reverse=True)
    for path in stale + live[keep:]:
        shutil.rmtree(path, ignore_errors=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
