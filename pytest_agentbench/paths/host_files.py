"""Host-side file access confined to a workspace directory.

The agent can create symlinks with `run`, so every path is resolved once and then opened component
by component with O_NOFOLLOW relative to a directory descriptor: a symlink swapped in between the
check and the open makes the open fail instead of escaping. Symlinks that stay inside the workspace
are followed; anything that leaves it raises PathEscape.

The agent can also create FIFOs and sockets, and a `run` may leave a background process behind, so
no host-side operation may block or run unbounded on what the agent left: a file is opened only
after its type is known (O_PATH, fstat, then a reopen of that very inode through /proc), so a FIFO
is never opened for reading or writing (NotRegularFile), and listings walk iteratively through
directory descriptors with caps on entries and depth and the deadline of the tool call in
progress (`host_deadline`); a cut listing says why (`Listing.incomplete`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pytest_agentbench.paths.files import PathEscape
from pytest_agentbench.paths.globs import matches_any

SKIP_DIRS = frozenset({".git"})
LIST_MAX_ENTRIES = 200_000  # directory entries one listing looks at, at most
LIST_MAX_DEPTH = 128  # directory levels one listing descends, at most
_DEADLINE_EVERY = 256  # entries between two looks at the clock

_PROC_FD = "/proc/self/fd"
_REOPEN = hasattr(os, "O_PATH") and os.path.isdir(_PROC_FD)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC


# -- deadline -------------------------------------------------------------------------------------
_deadline: ContextVar[float | None] = ContextVar("agentbench_host_deadline", default=None)


@contextlib.contextmanager
def host_deadline(seconds: float) -> Iterator[float]:
    """Bound the host-side file operations inside the block to `seconds` from now (nested blocks
    only shorten it). Listings cut at the deadline report it in `Listing.incomplete`."""
    at = time.monotonic() + seconds
    outer = _deadline.get()
    if outer is not None:
        at = min(at, outer)
    token = _deadline.set(at)
    try:
        yield at
    finally:
        _deadline.reset(token)


def current_deadline() -> float | None:
    """The monotonic deadline set by the innermost `host_deadline`, if any."""
    return _deadline.get()


# -- file types -----------------------------------------------------------------------------------
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
        probe = os.open(name, os.O_PATH | os.O_NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
        try:
            _check_regular(os.fstat(probe).st_mode, shown)
            return os.open(f"{_PROC_FD}/{probe}", flags | _CLOEXEC)
        finally:
            os.close(probe)
    with _refuse_symlink(shown):  # no O_PATH: a non-blocking open cannot hang on a FIFO
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC, dir_fd=dir_fd)
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


# -- walking --------------------------------------------------------------------------------------
@dataclass
class WalkEntry:
    """One entry met by `walk`: `rel` is its path below the walk's root ('/'-separated),
    `kind` one of dir, file, symlink, fifo, socket, device, other; `dir_fd` is its parent
    directory's descriptor, valid until the walk moves on."""

    rel: str
    name: str
    kind: str
    dir_fd: int


def _kind(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return "symlink"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    if entry.is_file(follow_symlinks=False):
        return "file"
    mode = entry.stat(follow_symlinks=False).st_mode
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "other"


class Walk:
    """A pre-order walk below an open directory descriptor, in name order, that never follows a
    symlink: each directory is opened with O_NOFOLLOW|O_DIRECTORY relative to its parent's
    descriptor, iteratively (no recursion limit, at most `max_depth` descriptors open).
    `descend(entry)` decides whether a directory is entered. The walk stops after `max_entries`
    entries or at `deadline` (monotonic); `incomplete` then says why, and `skipped` counts the
    directories it could not or would not enter for a limit."""

    def __init__(
        self,
        root_fd: int,
        *,
        max_entries: int | None = None,  # default LIST_MAX_ENTRIES
        max_depth: int | None = None,  # default LIST_MAX_DEPTH
        deadline: float | None = None,
        descend: Callable[[WalkEntry], bool] | None = None,
    ) -> None:
        self.root_fd = root_fd
        self.max_entries = LIST_MAX_ENTRIES if max_entries is None else max_entries
        self.max_depth = LIST_MAX_DEPTH if max_depth is None else max_depth
        self.deadline = deadline
        self.descend = descend
        self.incomplete: str | None = None
        self.seen = 0
        self.unreadable: list[str] = []

    def _stop(self, reason: str) -> None:
        if self.incomplete is None:
            self.incomplete = reason

    def _scan(self, fd: int) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        room = self.max_entries - self.seen
        with os.scandir(fd) as it:
            for entry in it:
                if len(out) >= room:
                    self._stop(f"stopped after {self.max_entries} entries")
                    break
                try:
                    out.append((entry.name, _kind(entry)))
                except OSError:  # vanished meanwhile
                    continue
        out.sort()
        return out

    def __iter__(self) -> Iterator[WalkEntry]:
        stack: list[tuple[int, str, Iterator[tuple[str, str]]]] = []
        try:
            stack.append((self.root_fd, "", iter(self._scan(self.root_fd))))
            while stack:
                fd, prefix, entries = stack[-1]
                item = next(entries, None)
                if item is None:
                    stack.pop()
                    if fd != self.root_fd:
                        os.close(fd)
                    continue
                if self.seen >= self.max_entries:
                    self._stop(f"stopped after {self.max_entries} entries")
                    return
                self.seen += 1
                if self.seen % _DEADLINE_EVERY == 0 and self._late():
                    return
                name, kind = item
                entry = WalkEntry(prefix + name, name, kind, fd)
                yield entry
                if kind != "dir" or (self.descend is not None and not self.descend(entry)):
                    continue
                if len(stack) > self.max_depth:
                    self._stop(f"did not descend below {self.max_depth} directory levels")
                    continue
                child = -1
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    listing = self._scan(child)
                except OSError:
                    if child >= 0:
                        os.close(child)
                    self.unreadable.append(entry.rel)
                    continue
                stack.append((child, entry.rel + "/", iter(listing)))
        finally:
            for fd, _, _ in stack:
                if fd != self.root_fd:
                    os.close(fd)

    def _late(self) -> bool:
        if self.deadline is not None and time.monotonic() > self.deadline:
            self._stop("stopped at the time limit")
            return True
        return False


def remove_tree(path: Path) -> list[str]:
    """Delete `path` and everything below it without following a symlink, iteratively: no
    recursion limit (shutil.rmtree raises RecursionError past ~1000 levels, which
    ignore_errors does not cover), no PATH_MAX, one directory descriptor open at a time. FIFOs,
    sockets and the rest are unlinked, never opened. Never raises: returns the entries it could
    not remove (relative to `path`)."""
    failed: list[str] = []
    try:
        os.lstat(path)
    except FileNotFoundError:
        return failed
    except OSError as exc:
        return [f".: {exc}"]
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        try:
            os.unlink(path)
        except OSError as exc:
            failed.append(f".: {exc}")
        return failed
    names: list[str] = []  # the directories descended into, below `path`
    stuck: set[str] = set()  # relative paths that would not go
    try:
        cur = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        return [f".: {exc}"]
    try:
        while True:
            prefix = "/".join(names) + "/" if names else ""
            subdir = None
            with os.scandir(cur) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
            for name, is_dir in entries:
                if prefix + name in stuck:
                    continue
                if is_dir:
                    subdir = subdir or name
                    continue
                try:
                    os.unlink(name, dir_fd=cur)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    stuck.add(prefix + name)
                    failed.append(f"{prefix}{name}: {exc.strerror}")
            if subdir is not None:
                try:
                    child = os.open(subdir, _DIR_FLAGS, dir_fd=cur)
                except OSError as exc:
                    stuck.add(prefix + subdir)
                    failed.append(f"{prefix}{subdir}: {exc.strerror}")
                    continue
                os.close(cur)
                cur = child
                names.append(subdir)
                continue
            if not names:
                break
            done = names.pop()
            parent = os.open("..", _DIR_FLAGS, dir_fd=cur)
            os.close(cur)
            cur = parent
            try:
                os.rmdir(done, dir_fd=cur)
            except OSError as exc:
                rel = "/".join([*names, done])
                stuck.add(rel)
                failed.append(f"{rel}: {exc.strerror}")
    except OSError as exc:
        failed.append(f"{'/'.join(names) or '.'}: {exc}")
        return failed
    finally:
        with contextlib.suppress(OSError):
            os.close(cur)
    try:
        os.rmdir(path)
    except OSError as exc:
        failed.append(f".: {exc.strerror}")
    return failed


class Listing(list[str]):
    """A file listing; `incomplete` says why it may lack files (None when it is whole)."""

    incomplete: str | None = None


def fold_parts(path: str) -> list[str]:
    """The components of a workspace-relative POSIX path with `.` and `..` folded away; raises
    PathEscape for an absolute path or one that climbs out. ([] is the workspace root.)"""
    if not path or "\0" in path:
        raise PathEscape(f"invalid path {path!r}")
    pure = PurePosixPath(path)
    if pure.is_absolute():
        raise PathEscape(
            f"{path}: absolute paths are not allowed; use a path relative to the workspace root"
        )
    parts: list[str] = []
    for part in pure.parts:
        if part == "..":
            if not parts:
                raise PathEscape(f"{path}: leaves the workspace")
            parts.pop()
        elif part != ".":
            parts.append(part)
    return parts


CHOWN_MAX_DEPTH = 512  # deeper entries were made by the sandbox's user anyway


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give a tree to uid:gid without following symlinks (a link in a repo may point anywhere
    on the host); entries already owned right are only stat-ed, so repeat calls are cheap.
    Iterative through directory descriptors (os.walk recursed once per level, and the agent
    can nest directories thousands deep); stops descending at CHOWN_MAX_DEPTH levels."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        st = os.fstat(fd)
        if st.st_uid != uid or st.st_gid != gid:
            os.fchown(fd, uid, gid)
        for entry in Walk(fd, max_entries=2**62, max_depth=CHOWN_MAX_DEPTH):
            try:
                st = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False)
                if st.st_uid != uid or st.st_gid != gid:
                    os.chown(entry.name, uid, gid, dir_fd=entry.dir_fd, follow_symlinks=False)
            except FileNotFoundError:  # gone meanwhile
                continue
    finally:
        os.close(fd)


@contextlib.contextmanager
def _refuse_symlink(path: str) -> Iterator[None]:
    """O_NOFOLLOW on the last component fails with ELOOP: report it as an escape."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathEscape(f"{path}: is a symlink") from exc
        raise


class HostFiles:
    def __init__(self, root: Path, owner_uid: int | None = None) -> None:
        self.root = Path(os.path.realpath(root))
        self.owner_uid = owner_uid

    # -- resolution -------------------------------------------------------------------------
    def relative(self, path: str) -> PurePosixPath:
        """Normalize a workspace-relative path; refuse absolute paths and `..` escapes."""
        parts = fold_parts(path)
        return PurePosixPath(*parts) if parts else PurePosixPath(".")

    def _resolved_parts(self, path: str) -> list[str]:
        rel = self.relative(path)
        real = os.path.realpath(self.root / rel)
        if real != str(self.root) and not real.startswith(str(self.root) + os.sep):
            raise PathEscape(f"{path}: resolves outside the workspace (symlink)")
        return [p for p in Path(real).relative_to(self.root).parts if p != "."]

    def _open_dir(self, parts: list[str], create: bool = False) -> int:
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts:
                if create:
                    try:
                        os.mkdir(part, 0o775, dir_fd=fd)
                        self._chown(part, fd)
                    except FileExistsError:
                        pass
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise PathEscape(f"{'/'.join(parts)}: a path component is a symlink") from exc
            raise
        return fd

    def _chown(self, name: str, dir_fd: int) -> None:
        if self.owner_uid is not None:
            os.chown(name, self.owner_uid, self.owner_uid, dir_fd=dir_fd, follow_symlinks=False)

    # -- operations ---------------------------------------------------------------------------
    def read_bytes(self, path: str, max_bytes: int | None = None) -> bytes:
        parts = self._resolved_parts(path)
        if not parts:
            raise IsADirectoryError(path)
        dfd = self._open_dir(parts[:-1])
        try:
            fd = open_regular(dfd, parts[-1], os.O_RDONLY, path)
        finally:
            os.close(dfd)
        try:
            if max_bytes is not None:
                return read_fd(fd, max_bytes)
            data = read_fd(fd, READ_ALL_LIMIT + 1)
            if len(data) > READ_ALL_LIMIT:
                raise FileTooLarge(
                    f"{path} is larger than {READ_ALL_LIMIT // (1024 * 1024)} MiB; the file "
                    "tools do not handle files that large (use run)"
                )
            return data
        finally:
            os.close(fd)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Overwrite a regular file in place (its mode and links kept) or create one; anything
        else there (a FIFO, a socket, a symlink, a directory) is refused without being opened."""
        parts = self._resolved_parts(path)
        if not parts:
            raise IsADirectoryError(path)
        dfd = self._open_dir(parts[:-1], create=True)
        try:
            try:
                fd = open_regular(dfd, parts[-1], os.O_WRONLY | os.O_TRUNC, path)
            except FileNotFoundError:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
                with _refuse_symlink(path):
                    fd = os.open(parts[-1], flags, 0o664, dir_fd=dfd)
            try:
                write_fd(fd, data)
                if self.owner_uid is not None:
                    os.fchown(fd, self.owner_uid, self.owner_uid)
            finally:
                os.close(fd)
        finally:
            os.close(dfd)

    def remove(self, path: str) -> None:
        rel = self.relative(path)
        parts = self._resolved_parts(str(rel.parent)) + [rel.name] if rel.name else []
        if not parts:
            raise IsADirectoryError(path)
        dfd = self._open_dir(parts[:-1])
        try:
            os.unlink(parts[-1], dir_fd=dfd)  # unlinks a symlink itself, never its target
        finally:
            os.close(dfd)

    def exists(self, path: str) -> bool:
        try:
            parts = self._resolved_parts(path)
        except PathEscape:
            return False
        return os.path.lexists(self.root.joinpath(*parts))

    def list(self, root: str = ".", glob: str | None = None, limit: int = 1000) -> list[str]:
        """Regular files and symlinks under `root` (paths relative to the workspace, sorted),
        skipping .git directories; at most `limit`. FIFOs, sockets and devices are left out; no
        symlink is followed. The walk looks at no more than LIST_MAX_ENTRIES entries, no deeper
        than LIST_MAX_DEPTH levels, and stops at the current `host_deadline`: the result is a
        Listing whose `incomplete` says so. A root that is not a directory lists nothing."""
        parts = self._resolved_parts(root)
        found = Listing()
        try:
            fd = self._open_dir(parts)
        except (OSError, PathEscape):
            return found
        prefix = "/".join(parts) + "/" if parts else ""
        walk = Walk(
            fd,
            deadline=current_deadline(),
            descend=lambda entry: entry.name not in SKIP_DIRS,
        )
        try:
            for entry in walk:
                if entry.kind not in ("file", "symlink"):
                    continue
                rel = prefix + entry.rel
                if glob is None or matches_any(rel, [glob]):
                    found.append(rel)
        finally:
            os.close(fd)
        found.sort()
        if len(found) > limit:
            del found[limit:]
        found.incomplete = walk.incomplete
        return found
