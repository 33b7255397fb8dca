"""The confinement contract every file access to a workspace keeps: `Files` and `PathEscape`."""

from __future__ import annotations

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
