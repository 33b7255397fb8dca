"""What a request may reach: files and runs inside the output root, nothing else.

An output root is data from elsewhere (a CI artifact, a colleague's upload): a file in it may be a
symlink to a host file, a FIFO, or huge. A URL path is percent-decoded once and refused (403) when
it is absolute, climbs (`..` after decoding, so `%2e%2e` too), holds a backslash or a NUL; every
read then goes through reporting.run_files, which opens each component from the root with
O_NOFOLLOW (a symlink anywhere on the way is refused, 403) and only regular files (a FIFO is
never opened). A run name is one directory directly under the root, no link, holding a regular
`run.json` or `attempts.jsonl`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from pytest_agentbench.reporting.names import ATTEMPTS_FILE, RUN_FILE
from pytest_agentbench.reporting.run_files import read_run_file

MAX_FILE_BYTES = 16 * 1024 * 1024  # a raw file is served up to this size, then cut


@dataclass(frozen=True)
class Served:
    """A file's bytes (status 200) or the refusal: status 403 or 404 and the one line why."""

    status: int
    data: bytes = b""
    why: str = ""
    cut: bool = False


def url_to_rel(url_path: str) -> str | Served:
    """The root-relative path a URL path names, or the refusal (403) for one that leaves it."""
    if not url_path.startswith("/"):
        return Served(403, why="not a path")
    try:
        rel = unquote(url_path[1:], errors="strict")
    except UnicodeDecodeError:
        return Served(403, why="refused: the path is not UTF-8")
    if "\0" in rel or "\\" in rel:
        return Served(403, why="refused: a NUL or a backslash in the path")
    pure = PurePosixPath(rel)
    if rel.startswith("/") or pure.is_absolute():
        return Served(403, why="refused: an absolute path")
    if ".." in pure.parts:
        return Served(403, why="refused: the path leaves the output root")
    return "/".join(p for p in pure.parts if p != ".")


def read_file(root: Path, url_path: str, max_bytes: int = MAX_FILE_BYTES) -> Served:
    """The file `url_path` names under `root`, read without following any link."""
    rel = url_to_rel(url_path)
    if isinstance(rel, Served):
        return rel
    if not rel:
        return Served(404, why="not found")
    found = read_run_file(root, rel, max_bytes)
    if found.data is not None:
        return Served(200, data=found.data, cut=found.cut)
    if found.missing:
        return Served(404, why="not found")
    if found.why.startswith("a directory"):
        return Served(404, why="a folder (no listing)")
    return Served(403, why=f"refused: {found.note}")


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def run_dir(root: Path, name: str) -> Path | None:
    """`root/name` when `name` is a run directly under `root` (no link, no climbing), else None."""
    if (not name or name in (".", "..") or name.startswith(".")
            or any(c in name for c in "/\\\0")):
        return None
    path = root / name
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            return None
    except OSError:
        return None
    meta, attempts = path / RUN_FILE, path / ATTEMPTS_FILE
    if os.path.lexists(meta) and not _regular(meta):
        return None
    if os.path.lexists(attempts) and not _regular(attempts):
        return None
    return path if _regular(meta) or _regular(attempts) else None


def run_names(root: Path) -> list[str]:
    """Every run directly under `root`, by name."""
    try:
        names = sorted(entry.name for entry in os.scandir(root))
    except OSError:
        return []
    return [name for name in names if run_dir(root, name) is not None]
