"""Reading the files of a run directory for a report page, without following a link.

A run directory is data from elsewhere (a CI artifact, a colleague's upload): any file in it may
be a symlink to a host file (the password file), a FIFO that blocks whoever opens it, or huge.
Every read here starts at the run directory and opens each component with O_NOFOLLOW (a linked
folder is refused as a linked file is), opens only regular files (paths.regular_files: a FIFO
is never opened), and reads at most a cap. What cannot be shown is one line saying why
(`RunFile.note`), which the page shows in place of the content. The run directory itself is
the user's choice (`latest` is a link to it) and is resolved once.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pytest_agentbench.paths.files import PathEscape
from pytest_agentbench.paths.regular_files import (
    DIR_FLAGS,
    NotRegularFile,
    describe_mode,
    open_regular,
    read_fd,
)

NOT_SHOWN = "not shown: "


@dataclass(frozen=True)
class RunFile:
    """`data` (at most the cap; `cut` when the file was longer), or None and why not: `where`
    (the run-relative path refused: the file or a folder on its way) is `why`. `missing` when
    there is nothing at that path (no reason worth showing)."""

    data: bytes | None = None
    cut: bool = False
    where: str = ""
    why: str = ""
    missing: bool = False

    @property
    def note(self) -> str:
        return f"{NOT_SHOWN}{self.where}: {self.why}"


def _parts(rel: str) -> list[str] | None:
    """The components of a run-relative path; None for one that is absolute or climbs out."""
    pure = PurePosixPath(rel)
    if pure.is_absolute() or ".." in pure.parts or "\0" in rel:
        return None
    return [p for p in pure.parts if p != "."]


def open_dir(run_dir: Path, rel: str) -> int | RunFile:
    """A descriptor of the folder `rel` under `run_dir`, reached without following a link (the
    caller closes it), or the RunFile saying why not (`missing` when nothing is there)."""
    parts = _parts(rel)
    if parts is None:
        return RunFile(where=rel, why="outside the run directory")
    fd = os.open(os.path.realpath(run_dir), DIR_FLAGS)
    done: list[str] = []
    try:
        for part in parts:
            done.append(part)
            nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as exc:
        os.close(fd)
        where = "/".join(done)
        if exc.errno == errno.ENOENT:
            return RunFile(where=where, missing=True)
        why = {errno.ELOOP: "a symbolic link", errno.ENOTDIR: "not a folder"}.get(
            exc.errno or 0, f"cannot be opened ({exc.strerror})")
        return RunFile(where=where, why=why)
    return fd


def read_run_file(run_dir: Path, rel: str, max_bytes: int) -> RunFile:
    """The first `max_bytes` of the regular file `rel` under `run_dir` (see the module)."""
    parts = _parts(rel)
    if not parts:
        return RunFile(where=rel, why="outside the run directory")
    parent = open_dir(run_dir, "/".join(parts[:-1]) or ".")
    if isinstance(parent, RunFile):
        return parent
    try:
        return read_in(parent, parts[-1], max_bytes, rel)
    finally:
        os.close(parent)


def read_in(dir_fd: int, name: str, max_bytes: int, shown: str) -> RunFile:
    """`read_run_file` of `name` in the folder `dir_fd` (`shown` names it in a note)."""
    try:
        fd = open_regular(dir_fd, name, os.O_RDONLY, shown)
    except FileNotFoundError:
        return RunFile(where=shown, missing=True)
    except PathEscape:
        return RunFile(where=shown, why="a symbolic link")
    except (NotRegularFile, IsADirectoryError):
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        return RunFile(where=shown, why=f"{describe_mode(mode)}, not a regular file")
    except OSError as exc:
        return RunFile(where=shown, why=f"cannot be read ({exc.strerror or exc})")
    try:
        data = read_fd(fd, max_bytes + 1)
    except OSError as exc:
        return RunFile(where=shown, why=f"cannot be read ({exc.strerror or exc})")
    finally:
        os.close(fd)
    return RunFile(data=data[:max_bytes], cut=len(data) > max_bytes)


def list_dir(dir_fd: int) -> list[str]:
    """The names in the folder `dir_fd`, sorted (scandir works on a copy of the descriptor)."""
    with os.scandir(dir_fd) as entries:
        return sorted(e.name for e in entries)
