"""Descriptor-level I/O that never opens a FIFO, a device or a symlink by mistake.

The agent can create FIFOs and sockets, and swap a symlink in between a check and an open. A file
is opened only after its type is known (O_PATH, fstat, then a reopen of that very inode through
/proc), so a FIFO is never opened for reading or writing (NotRegularFile), and a final symlink
is refused (PathEscape). Used by HostFiles, the directory walk and the workspace keeper.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator

from pytest_agentbench.paths.files import PathEscape

_PROC_FD = "/proc/self/fd"
_REOPEN = hasattr(os, "O_PATH") and os.path.isdir(_PROC_FD)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | CLOEXEC  # a directory, never a link

READ_ALL_LIMIT = 64 * 1024 * 1024  # read_bytes(max_bytes=None) refuses larger files


class FileTooLarge(OSError):
    """read_bytes without a limit on a file larger than READ_ALL_LIMIT (a sparse file of many
    gigabytes costs the agent nothing and would fill the host's memory)."""


class NotRegularFile(OSError):
    """A FIFO, socket or device where a regular file was expected. The file tools never open one
    (a FIFO blocks the opener until someone opens its other end)."""


def describe_mode(mode: int) -> str:
    """'a FIFO (named pipe)', 'a socket', ... for an st_mode."""
    kinds = (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symlink"),
        (stat.S_ISREG, "a regular file"),
    )
    for test, name in kinds:
        if test(mode):
            return name
    return "a special file"


def _check_regular(mode: int, path: str) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
    if stat.S_ISLNK(mode):
        raise PathEscape(f"{path}: is a symlink")
    raise NotRegularFile(
        f"{path} is {describe_mode(mode)}, not a regular file; the file tools only read and "
        "write regular files (remove_file can delete it)"
    )


def open_regular(dir_fd: int, name: str, flags: int, path: str | None = None) -> int:
    """Open `name` in `dir_fd` with `flags` (O_RDONLY, or O_WRONLY|O_TRUNC) only if it is a regular
    file, never following a symlink. Raises FileNotFoundError, IsADirectoryError, NotRegularFile,
    or PathEscape (a symlink). With O_PATH the type is checked before any real open, and the
    reopen through /proc reaches the very inode checked: nothing else is ever opened."""
    shown = path or name
    if _REOPEN:
        probe = os.open(name, os.O_PATH | os.O_NOFOLLOW | CLOEXEC, dir_fd=dir_fd)
        try:
            _check_regular(os.fstat(probe).st_mode, shown)
            return os.open(f"{_PROC_FD}/{probe}", flags | CLOEXEC)
        finally:
            os.close(probe)
    with refuse_symlink(shown):  # no O_PATH: a non-blocking open cannot hang on a FIFO
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | CLOEXEC, dir_fd=dir_fd)
    try:
        _check_regular(os.fstat(fd).st_mode, shown)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_fd(fd: int, max_bytes: int | None) -> bytes:
    """At most `max_bytes` (all when None) from a regular file's descriptor."""
    chunks: list[bytes] = []
    left = max_bytes
    while left is None or left > 0:
        chunk = os.read(fd, 1 << 20 if left is None else min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        if left is not None:
            left -= len(chunk)
    return b"".join(chunks)


def write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextlib.contextmanager
def refuse_symlink(path: str) -> Iterator[None]:
    """O_NOFOLLOW on the last component fails with ELOOP: report it as an escape."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathEscape(f"{path}: is a symlink") from exc
        raise
