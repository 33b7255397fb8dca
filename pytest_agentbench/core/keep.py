"""Keep an attempt's final workspace for people to look at, inert.

The workspace is the agent's: anything in it may be an attack on whoever opens the kept copy. A
`.git` (directory, `gitdir:` file or symlink, at any depth) or a planted bare repository would make
the user's next `git status` there run the agent's `core.fsmonitor`, hooks or filters; a FIFO
would hang a copy; a symlink to an absolute path would lead the user's tools (or an artifact
upload) into the host; a setuid bit would survive on a root-owned copy. So the copy is built, not
moved:

- only directories, regular files and symlinks that are relative and resolve inside the copy are
  kept; files get 0644 or 0755 (no setuid/setgid/sticky, no group or other write), directories
  0755; FIFOs, sockets, devices and other symlinks are skipped and listed;
- no entry whose name is `.git` is kept at any depth, whatever its type, including the spellings
  that git treats as `.git` on case-insensitive or NTFS-like file systems (`.GIT`, `.git.`,
  `git~1`, `.git::$INDEX_ALLOCATION`, HFS-ignorable code points);
- no file or symlink named HEAD that git would accept as a repository's HEAD is kept, so no
  directory of the copy is a git directory (git's discovery tries each directory itself as a bare
  repository: HEAD, objects/ and refs/ are enough);
- nothing is followed: every directory is opened with O_NOFOLLOW relative to its parent's
  descriptor, every file after an O_PATH type check (paths/regular_files.py, paths/walk.py);
- the copy is bounded in bytes, entries, depth and time, and `keep_workspace` never raises: what
  went wrong is a note in the KeepReport (the attempt's record must not be lost to a kept repo).

Git's discovery from inside the copy can therefore find no repository in it; walking up it finds
only what encloses the run directory, which the harness and the user own.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentbench.paths.files import PathEscape
from pytest_agentbench.paths.regular_files import open_regular, read_fd
from pytest_agentbench.paths.walk import Walk, WalkEntry

KEEP_MAX_BYTES = 1024 * 1024 * 1024  # file content kept per workspace
KEEP_MAX_ENTRIES = 200_000
KEEP_MAX_DEPTH = 128
KEEP_MAX_SECONDS = 300.0
MAX_LISTED = 1000  # skipped entries named in the report; the rest are only counted

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_CHUNK = 1 << 20
# Code points HFS+ ignores in names (git's is_hfs_dotgit): ".g\u200cit" is ".git" there.
_IGNORABLE = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")
_HEADREF = re.compile(rb"\s*(?:ref:|[0-9a-fA-F]{40})")


@dataclass
class KeepReport:
    """What keep_workspace kept and left out. `ok` is false when the copy was not made or is
    incomplete; `notes` say why. Plain JSON types only (`to_dict`)."""

    source: str
    dest: str
    ok: bool = False
    files: int = 0
    dirs: int = 0
    symlinks: int = 0
    bytes: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)  # {path, reason}, MAX_LISTED
    skipped_count: int = 0
    notes: list[str] = field(default_factory=list)
    duration_ms: int = 0

    def skip(self, path: str, reason: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_LISTED:
            self.skipped.append({"path": path, "reason": reason})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fold(name: str) -> str:
    """A name as a case-insensitive, NTFS- or HFS-like file system may see it."""
    folded = _IGNORABLE.sub("", name).lower()
    return folded.split(":", 1)[0].rstrip(". ")


def is_git_name(name: str) -> bool:
    """Whether git on some file system could take this name for `.git`."""
    folded = _fold(name)
    return folded in (".git", "git~1")


def _is_head_name(name: str) -> bool:
    return _fold(name) == "head"


def keep_workspace(
    repo: Path,
    dest: Path,
    *,
    max_bytes: int = KEEP_MAX_BYTES,
    max_entries: int = KEEP_MAX_ENTRIES,
    max_seconds: float = KEEP_MAX_SECONDS,
) -> KeepReport:
    """Copy the workspace `repo` to `dest` (created; it must not exist or be empty), inert, as
    the module docstring describes. Never raises (but for KeyboardInterrupt)."""
    report = KeepReport(source=str(repo), dest=str(dest))
    started = time.monotonic()
    try:
        _Keeper(report, repo, dest, max_bytes, max_entries, max_seconds).run()
    except Exception as exc:  # never lose the attempt's record to its kept repo
        report.ok = False
        report.notes.append(f"keeping the workspace failed: {type(exc).__name__}: {exc}")
    report.duration_ms = int((time.monotonic() - started) * 1000)
    return report


class _Keeper:
    def __init__(
        self,
        report: KeepReport,
        repo: Path,
        dest: Path,
        max_bytes: int,
        max_entries: int,
        max_seconds: float,
    ) -> None:
        self.report, self.repo, self.dest = report, repo, dest
        self.max_bytes, self.max_entries = max_bytes, max_entries
        self.deadline = time.monotonic() + max_seconds
        self.links: list[tuple[str, str]] = []  # (rel, target) to create once all else is there
        self.made_dirs: set[str] = set()

    # -- top level ----------------------------------------------------------------------------
    def run(self) -> None:
        try:
            src_fd = os.open(self.repo, _DIR_FLAGS)
        except OSError as exc:
            self.report.notes.append(f"workspace not kept: cannot open {self.repo}: {exc}")
            return
        try:
            dest_fd = self._make_dest()
            if dest_fd is None:
                return
            try:
                complete = self._copy(src_fd, dest_fd)
                self._link(dest_fd)
            finally:
                os.close(dest_fd)
        finally:
            os.close(src_fd)
        self.report.ok = complete and not self.report.notes

    def _make_dest(self) -> int | None:
        self.dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(self.dest, 0o755)
        except FileExistsError:
            if not self.dest.is_dir() or self.dest.is_symlink() or any(self.dest.iterdir()):
                self.report.notes.append(f"workspace not kept: {self.dest} already exists")
                return None
        fd = os.open(self.dest, _DIR_FLAGS)
        os.fchmod(fd, 0o755)
        return fd

    # -- the copy -----------------------------------------------------------------------------
    def _copy(self, src_fd: int, dest_fd: int) -> bool:
        stack: list[tuple[str, int]] = [("", dest_fd)]  # (rel of a kept directory, its fd)
        walk = Walk(
            src_fd,
            max_entries=self.max_entries,
            max_depth=KEEP_MAX_DEPTH,
            deadline=self.deadline,
            descend=lambda entry: entry.rel in self.made_dirs,
        )
        try:
            for entry in walk:
                parent = entry.rel.rpartition("/")[0]
                while len(stack) > 1 and stack[-1][0] != parent:
                    os.close(stack.pop()[1])
                if stack[-1][0] != parent:  # the parent was not kept: nor is anything below it
                    continue
                try:
                    made = self._entry(entry, stack[-1][1])
                except (OSError, PathEscape) as exc:  # e.g. changed type since the scan
                    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                    self.report.skip(entry.rel, f"could not be copied: {reason}")
                    continue
                if made is not None:
                    stack.append((entry.rel, made))
        finally:
            for _, fd in stack[1:]:
                os.close(fd)
        for rel in walk.unreadable:
            self.report.skip(rel, "directory could not be read")
        if walk.incomplete:
            self.report.notes.append(f"copy incomplete: {walk.incomplete}")
            return False
        return True

    def _entry(self, entry: WalkEntry, dest_dir: int) -> int | None:
        """Copy one entry into `dest_dir`; the new directory's fd for a directory kept."""
        if is_git_name(entry.name):
            self.report.skip(entry.rel, f"a .git {_kind_text(entry.kind)} is never kept")
            return None
        if entry.kind == "dir":
            os.mkdir(entry.name, 0o755, dir_fd=dest_dir)
            fd = os.open(entry.name, _DIR_FLAGS, dir_fd=dest_dir)
            os.fchmod(fd, 0o755)
            self.made_dirs.add(entry.rel)
            self.report.dirs += 1
            return fd
        if entry.kind == "file":
            self._file(entry, dest_dir)
        elif entry.kind == "symlink":
            self._symlink(entry)
        else:
            self.report.skip(entry.rel, f"{_kind_text(entry.kind)}: only regular files are kept")
        return None

    def _file(self, entry: WalkEntry, dest_dir: int) -> None:
        src = open_regular(entry.dir_fd, entry.name, os.O_RDONLY, entry.rel)
        try:
            st = os.fstat(src)
            if _is_head_name(entry.name) and _HEADREF.match(read_fd(src, 256)):
                self.report.skip(entry.rel, "looks like a git HEAD (a planted repository)")
                return
            room = self.max_bytes - self.report.bytes
            if st.st_size > room:
                self.report.skip(
                    entry.rel, f"{st.st_size} bytes: over the byte budget ({self.max_bytes})"
                )
                return
            os.lseek(src, 0, os.SEEK_SET)
            mode = 0o755 if st.st_mode & 0o111 else 0o644
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
            out = os.open(entry.name, flags, 0o600, dir_fd=dest_dir)
            try:
                copied = _copy_bytes(src, out, room)
                if copied > room:  # it grew while we copied
                    os.close(out)
                    out = -1
                    os.unlink(entry.name, dir_fd=dest_dir)
                    self.report.skip(entry.rel, f"over the byte budget ({self.max_bytes})")
                    return
                os.fchmod(out, mode)
                os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                if out >= 0:
                    os.close(out)
            self.report.files += 1
            self.report.bytes += copied
        finally:
            os.close(src)

    def _symlink(self, entry: WalkEntry) -> None:
        target = os.readlink(entry.name, dir_fd=entry.dir_fd)
        if _is_head_name(entry.name):
            self.report.skip(entry.rel, f"symlink named HEAD (-> {target}) is never kept")
            return
        inside = _lexically_inside(entry.rel, target)
        if not inside:
            self.report.skip(entry.rel, f"symlink pointing outside the workspace (-> {target})")
            return
        self.links.append((entry.rel, target))

    # -- symlinks, last ---------------------------------------------------------------------------
    def _link(self, dest_fd: int) -> None:
        """Create the kept symlinks once every directory and file is in place, then drop any
        that resolve outside the copy (a chain through other links can)."""
        made: list[str] = []
        for rel, target in self.links:
            parent, _, name = rel.rpartition("/")
            try:
                dfd = _open_below(dest_fd, parent)
            except OSError:
                self.report.skip(rel, f"symlink (-> {target}): its directory was not kept")
                continue
            try:
                os.symlink(target, name, dir_fd=dfd)
                made.append(rel)
            except OSError as exc:
                self.report.skip(rel, f"symlink could not be made: {exc.strerror or exc}")
            finally:
                os.close(dfd)
        root = os.path.realpath(self.dest)
        targets = dict(self.links)
        for _ in range(2):  # a removal can only turn another link's escape into a dangling link
            for rel in list(made):
                real = os.path.realpath(os.path.join(self.dest, rel))
                if real != root and not real.startswith(root + os.sep):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(self.dest, rel))
                    made.remove(rel)
                    self.report.skip(
                        rel, f"symlink resolving outside the workspace (-> {targets[rel]})"
                    )
        self.report.symlinks = len(made)


def _open_below(root_fd: int, rel: str) -> int:
    fd = os.dup(root_fd)
    try:
        for part in [p for p in rel.split("/") if p]:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lexically_inside(rel: str, target: str) -> bool:
    """A relative target that, read from the link's directory, stays below the root."""
    if not target or target.startswith("/") or "\0" in target:
        return False
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    return joined != ".." and not joined.startswith("../") and not joined.startswith("/")


def _copy_bytes(src: int, out: int, room: int) -> int:
    """Copy until EOF or one byte past `room`; returns the bytes written."""
    total = 0
    while total <= room:
        chunk = os.read(src, min(_CHUNK, room + 1 - total))
        if not chunk:
            break
        view = memoryview(chunk)
        while view:
            view = view[os.write(out, view) :]
        total += len(chunk)
    return total


def _kind_text(kind: str) -> str:
    return {
        "dir": "directory",
        "file": "file",
        "symlink": "symlink",
        "fifo": "FIFO (named pipe)",
        "socket": "socket",
        "device": "device",
    }.get(kind, "special file")


__all__ = ["KeepReport", "is_git_name", "keep_workspace"]
