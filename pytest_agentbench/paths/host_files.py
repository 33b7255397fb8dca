"""Host-side file access confined to a workspace directory (`HostFiles`, the `Files` port).

The agent can create symlinks with `run`, so every path is resolved once and then opened component
by component with O_NOFOLLOW relative to a directory descriptor: a symlink swapped in between the
check and the open makes the open fail instead of escaping. Symlinks that stay inside the workspace
are followed; anything that leaves it raises PathEscape. Files are opened only once their type is
known (paths.regular_files), and listings are bounded walks (paths.walk).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path, PurePosixPath

from pytest_agentbench.paths.deadline import current_deadline
from pytest_agentbench.paths.files import PathEscape, fold_parts
from pytest_agentbench.paths.globs import matches_any
from pytest_agentbench.paths.regular_files import (
    CLOEXEC,
    READ_ALL_LIMIT,
    FileTooLarge,
    open_regular,
    read_fd,
    refuse_symlink,
    write_fd,
)
from pytest_agentbench.paths.walk import Listing, Walk

SKIP_DIRS = frozenset({".git"})


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
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | CLOEXEC
                with refuse_symlink(path):
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
