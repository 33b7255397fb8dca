"""Per-commit packs cut from a mirror: the history of exactly one pinned commit.

Building one costs a ``git pack-objects`` run; every further workspace for that commit is a
plain file copy (much faster than ``git fetch`` from the mirror, which packs *and* re-indexes
every object each time). Only the newest ``keep`` commit packs per mirror are kept on disk.
Callers hold the mirror lock: shared to copy from a commit pack, exclusive to build or evict.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from pytest_agentbench.repos.gitcmd import run_git


def commit_pack_files(pack_dir: Path) -> list[Path]:
    """The pack and index files of a commit pack, or ``[]`` when it does not exist."""
    if not pack_dir.is_dir():
        return []
    return sorted(p for p in pack_dir.iterdir() if p.suffix in (".pack", ".idx"))


def touch(pack_dir: Path) -> None:
    """Mark a commit pack as recently used (eviction goes by mtime)."""
    os.utime(pack_dir)


def build_commit_pack(mirror: Path, commit: str, pack_dir: Path, timeout: float) -> None:
    """Pack ``commit`` and its ancestors from ``mirror`` into ``pack_dir`` (atomically)."""
    pack_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = pack_dir.with_name(f".tmp-{commit}-{uuid.uuid4().hex[:8]}")
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
        os.rename(tmp, pack_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def evict(packs_root: Path, keep: int) -> None:
    """Delete all but the ``keep`` most recently used commit packs, plus stale temp dirs."""
    if not packs_root.is_dir():
        return
    entries = list(packs_root.iterdir())
    stale = [p for p in entries if p.name.startswith(".tmp-")]
    live = sorted((p for p in entries if p not in stale), key=_mtime, reverse=True)
    for path in stale + live[keep:]:
        shutil.rmtree(path, ignore_errors=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
