"""The project's own git repository as a task's `repo.url`.

A relative `repo.url` must stay inside the taskpacks directory, so that a task file cannot hand
an arbitrary host repository to the agent. One place outside it is allowed too: the git
repository that contains the taskpacks directory, named exactly (its work tree's top directory,
or its `.git` directory). That is the repository a team's own taskpacks are about, and the
relative path (`../../..` for `<repo>/taskpacks/<suite>/<task>`) works in every clone of it.
A subdirectory of it, another repository beside it, or a symlink to either is still refused.

Pure: the file system only (no git is run), symlinks resolved on both sides.
"""

from __future__ import annotations

import os
from pathlib import Path

MAX_LEVELS = 64  # directories walked up from the taskpacks directory


def containing_repository(directory: Path) -> Path | None:
    """The top of the nearest git work tree at or above `directory` (resolved): the first
    directory with a `.git` entry (a directory, or a file for a worktree or a submodule)."""
    try:
        here = Path(os.path.realpath(directory))
    except (OSError, ValueError):
        return None
    for _ in range(MAX_LEVELS):
        if os.path.lexists(here / ".git"):
            return here
        if here.parent == here:
            return None
        here = here.parent
    return None


def is_own_repository(target: Path, taskpacks_root: Path) -> bool:
    """Whether `target` (resolved) is the git repository that contains `taskpacks_root`."""
    top = containing_repository(taskpacks_root)
    if top is None:
        return False
    resolved = Path(os.path.realpath(target))
    return resolved == top or (resolved == top / ".git" and resolved.is_dir())


def own_repository_hint(taskpacks_root: Path, task_dir: Path) -> str:
    """What a relative `repo.url` may name instead, for a refusal's message."""
    top = containing_repository(taskpacks_root)
    if top is None:
        return "a bundle or repository inside it"
    try:
        relative = os.path.relpath(top, os.path.realpath(task_dir))
    except ValueError:
        return "a bundle or repository inside it"
    return f"a bundle or repository inside it, or {relative} (the git repository holding it)"
