"""Whole-directory operations on the host."""

from __future__ import annotations

import subprocess
from pathlib import Path


def copy_tree(src: Path, dst: Path) -> None:
    """cp -a keeps owners, modes and symlinks (the sandbox user owns these files)."""
    dst.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", f"{src}/.", str(dst)], check=True, capture_output=True)
