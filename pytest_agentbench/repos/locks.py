"""Inter-process locks on mirror directories (pytest-xdist workers race for the same mirror)."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_agentbench.repos.gitcmd import RepoError


@contextmanager
def file_lock(path: Path, *, shared: bool, timeout: float) -> Iterator[None]:
    """Hold ``flock`` on ``path``: shared for readers, exclusive for writers.

    Polls instead of blocking so a stuck holder turns into a clear error after ``timeout``
    seconds. The kernel drops the lock when the holder dies, so a crash never wedges it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        _acquire(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX, path, timeout)
        yield
    finally:
        os.close(fd)


def _acquire(fd: int, mode: int, path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise RepoError(f"timed out after {timeout:g}s waiting for lock {path}") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
