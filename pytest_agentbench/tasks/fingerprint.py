"""A task's content fingerprint: what says two runs (or a run and a validation) saw the same
task. It is the sha256 over every file of the task's directory (task.yaml, oracle.patch, hidden
tests and anything else the task keeps there): each file's path relative to the directory, its
kind and its bytes (a symbolic link: its target, never followed), in path order. The repository
is not in it: the resolved commit (the record's `task_commit`) pins that and is compared beside
it. The attempt's folder keeps it as `task.sha256` (FINGERPRINT_FILE), written beside the frozen
task.yaml, so a report can tell a validation of this task's content from a stale one.

A directory of more than MAX_FILES files or MAX_BYTES bytes is cut there (the fingerprint says
so: `<digest>+cut`): two tasks that differ only beyond the cut would share it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

FINGERPRINT_FILE = "task.sha256"
MAX_FILES = 5000
MAX_BYTES = 256 * 1024 * 1024
_CHUNK = 1 << 20


def task_fingerprint(task_dir: Path) -> str:
    """`sha256:<hex>` of `task_dir`'s files (see the module), `+cut` when it was cut."""
    digest = hashlib.sha256()
    files, total, cut = 0, 0, False
    for rel, path in _walk(task_dir):
        files += 1
        if files > MAX_FILES or total > MAX_BYTES:
            cut = True
            break
        if path.is_symlink():
            digest.update(b"L\0" + rel.encode() + b"\0" + os.readlink(path).encode() + b"\0")
            continue
        digest.update(b"F\0" + rel.encode() + b"\0")
        with path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                total += len(chunk)
                digest.update(chunk)
        digest.update(b"\0")
    return f"sha256:{digest.hexdigest()}" + ("+cut" if cut else "")


def _walk(root: Path) -> list[tuple[str, Path]]:
    """(posix path relative to `root`, path) of each regular file and link, sorted; links to
    folders are not entered; caches Python leaves (`__pycache__`) are not task content."""
    out: list[tuple[str, Path]] = []
    for folder, dirs, names in os.walk(root, followlinks=False):
        base = Path(folder)
        links = [d for d in dirs if (base / d).is_symlink()]
        dirs[:] = sorted(d for d in dirs if d not in links and d != "__pycache__")
        for name in [*names, *links]:
            path = base / name
            if path.is_symlink() or path.is_file():
                out.append((path.relative_to(root).as_posix(), path))
    return sorted(out)


def write_fingerprint(task_dir: Path, attempt_dir: Path) -> None:
    """`<attempt_dir>/task.sha256`: the task's fingerprint, one line (a task directory that
    cannot be read leaves no file: a report then shows no validation as current)."""
    try:
        line = task_fingerprint(task_dir)
    except OSError:
        return
    (attempt_dir / FINGERPRINT_FILE).write_text(line + "\n", "utf-8")
