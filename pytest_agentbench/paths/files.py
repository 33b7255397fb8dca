"""The confinement contract every file access to a workspace keeps: `Files` and `PathEscape`,
and `fold_parts`, which turns a workspace-relative path into its components or refuses it."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Protocol


class PathEscape(Exception):
    """A path leaves the workspace (`..`, absolute, or a symlink pointing outside)."""


class Files(Protocol):
    """File access confined to the workspace. Paths are relative to the workspace root; no
    component may be a symlink that leaves it. Implemented in paths/host_files.py (host side)."""

    def read_bytes(self, path: str, max_bytes: int | None = None) -> bytes: ...
    def write_bytes(self, path: str, data: bytes) -> None: ...
    def remove(self, path: str) -> None: ...
    def exists(self, path: str) -> bool: ...
    def list(self, root: str = ".", glob: str | None = None, limit: int = 1000) -> list[str]: ...


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
