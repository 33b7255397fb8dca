"""A bounded directory walk that never follows a symlink (`Walk`), and the listing it yields.

Listings walk what the agent left: iteratively through directory descriptors (no recursion
limit), with caps on entries and depth and the deadline of the tool call in progress
(`paths.deadline`); a cut listing says why (`Listing.incomplete`).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pytest_agentbench.paths.regular_files import DIR_FLAGS

LIST_MAX_ENTRIES = 200_000  # directory entries one listing looks at, at most
LIST_MAX_DEPTH = 128  # directory levels one listing descends, at most
_DEADLINE_EVERY = 256  # entries between two looks at the clock


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
                    child = os.open(name, DIR_FLAGS, dir_fd=fd)
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


class Listing(list[str]):
    """A file listing; `incomplete` says why it may lack files (None when it is whole)."""

    incomplete: str | None = None
