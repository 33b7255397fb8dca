"""An exclusive `flock` held on a lock file for a block, waiting as long as it takes (the kernel
drops it when the holder dies): for work that must happen once however many processes ask at
the same time (a program's install, its copy on an engine). repos/locks.py has the polling kind
with a timeout, for the mirrors."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def held_exclusively(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing) for the block."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
