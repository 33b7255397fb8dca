"""Directory chains deeper than a path the kernel resolves in one go (PATH_MAX), for the tests
of listings, copies and removals that must not recurse once per level."""

from __future__ import annotations

import os
from pathlib import Path


def nest_dirs(root: Path, levels: int, name: str = "d") -> Path:
    """Make `root/name/name/...` `levels` deep, each level opened from the one above (no long
    path is ever resolved); returns its first level, `root/name`."""
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    return root / name
