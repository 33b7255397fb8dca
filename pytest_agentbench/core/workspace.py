"""Host-side file access confined to a workspace directory.

The agent can create symlinks with `run`, so every path is resolved once and then opened component
by component with O_NOFOLLOW relative to a directory descriptor: a symlink swapped in between the
check and the open makes the open fail instead of escaping. Symlinks that stay inside the workspace
are followed; anything that leaves it raises PathEscape.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from pytest_agentbench.core.globs import matches_any
from pytest_agentbench.core.ports import PathEscape

SKIP_DIRS = frozenset({".git"})


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


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give a tree to uid:gid without following symlinks (a link in a repo may point anywhere
    on the host); entries already owned right are only stat-ed, so repeat calls are cheap."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [".", *dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if st.st_uid != uid or st.st_gid != gid:
                os.lchown(path, uid, gid)


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
            with _refuse_symlink(path):
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dfd)
        finally:
            os.close(dfd)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise IsADirectoryError(f"{path}: not a regular file")
            return handle.read() if max_bytes is None else handle.read(max_bytes)

    def write_bytes(self, path: str, data: bytes) -> None:
        parts = self._resolved_parts(path)
        if not parts:
            raise IsADirectoryError(path)
        dfd = self._open_dir(parts[:-1], create=True)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
            with _refuse_symlink(path):
                fd = os.open(parts[-1], flags, 0o664, dir_fd=dfd)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            self._chown(parts[-1], dfd)
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
        """Regular files under `root` (relative paths, sorted), skipping .git; at most `limit`."""
        base = self.root.joinpath(*self._resolved_parts(root))
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                rel = os.path.relpath(os.path.join(dirpath, name), self.root)
                if glob is None or matches_any(rel, [glob]):
                    found.append(rel)
        found.sort()
        return found[:limit]
