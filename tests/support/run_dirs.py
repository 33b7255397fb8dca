"""The run directories under an output root (not its `latest` link)."""

from __future__ import annotations

from pathlib import Path


def run_dirs(out: Path) -> list[Path]:
    """Every run directory in `out`, sorted by name; the `latest` link is not one."""
    if not out.is_dir():
        return []
    return sorted(p for p in out.iterdir() if p.is_dir() and not p.is_symlink())
