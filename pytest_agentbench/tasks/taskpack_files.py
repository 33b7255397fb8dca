"""Reading the files a taskpack provides (task.yaml, oracle.patch, scripted.yaml, variant YAML).

They come from whoever wrote the taskpack, so nothing is read blindly: only regular files (a FIFO
or device would block or never end), within a size limit, and a task-local file only inside its
task directory (`open_task_file`). What must not be read raises UnsafeFileError, one line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pytest_agentbench.schemas.task import relative_path_problem

MAX_TASK_FILE_BYTES = 1 << 20  # a task.yaml or a variant YAML
MAX_TASK_ASSET_BYTES = 16 << 20  # oracle.patch, scripted.yaml


class UnsafeFileError(Exception):
    """A task-provided file that must not be read: outside its directory, not a regular file
    (a FIFO or device would block or never end), or too large. The message is one line."""


def read_regular_file(path: Path, limit: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of a regular file of at most `limit` bytes.

    Checks the type before opening (opening a FIFO blocks, some devices act on open), opens
    non-blocking (and without following a final symlink unless asked), then checks again on the
    open descriptor, so a file swapped in between is refused too.
    """
    before = os.stat(path, follow_symlinks=follow_symlinks)
    _check_regular(before, limit)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags)
    try:
        after = os.fstat(fd)
        _check_regular(after, limit)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise UnsafeFileError("the file changed while it was opened")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise UnsafeFileError(f"file is too large (more than {limit} bytes)")
    return b"".join(chunks)


def _check_regular(info: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeFileError(f"not a regular file ({_file_kind(info.st_mode)})")
    if info.st_size > limit:
        raise UnsafeFileError(f"file is too large ({info.st_size} bytes; at most {limit})")


def _file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    )
    return next((name for test, name in kinds if test(mode)), "not a file")


def open_task_file(task_dir: Path, relative: str, limit: int, *, check_only: bool = False) -> bytes:
    """Read `relative` (oracle.patch, scripted.yaml) from a task's directory, confined to it.

    The path must be relative without `..`; after resolving symlinks it must still lie inside
    the task directory; it must be a regular file of at most `limit` bytes. Raises
    FileNotFoundError when it does not exist, UnsafeFileError when it must not be read.
    """
    problem = relative_path_problem(relative)
    if problem is not None:
        raise UnsafeFileError(f"{relative!r}: {problem}")
    base = task_dir.resolve()
    resolved = (base / relative).resolve()
    if not resolved.is_relative_to(base):
        raise UnsafeFileError(
            f"{relative!r} resolves outside the task directory (a symlink pointing out?)"
        )
    if not os.path.lexists(resolved):
        raise FileNotFoundError(relative)
    if check_only:
        _check_regular(os.stat(resolved, follow_symlinks=False), limit)
        return b""
    return read_regular_file(resolved, limit, follow_symlinks=False)
