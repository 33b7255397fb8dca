"""A task's reference solution, checked before anything runs (`agentbench validate-tasks`):
oracle.patch exists, is a unified diff, and applies at `repo.commit` with the same strict patcher
the oracle agent uses (tools/patching.py), read from the repository's mirror with no checkout and
no sandbox. A repository the taskpack carries (a path or `file://`) is checked; a remote one
would need the network, so its patch is only parsed here and applied by `validate-tasks --run`.

Without this, a missing, misspelled or stale oracle.patch said "spec valid" and surfaced only in a
run under the oracle.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from pytest_agentbench.repos.gitcmd import RepoError
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.repos.sources import is_url, resolve_source
from pytest_agentbench.tasks.loader import LoadedTask
from pytest_agentbench.tasks.taskpack_files import (
    MAX_TASK_ASSET_BYTES,
    UnsafeFileError,
    open_task_file,
)
from pytest_agentbench.tools.patching import PatchError, parse_patch, plan_patch

GIT_TIMEOUT = 60.0


class CommitFiles:
    """The files of one commit of a bare repository, read-only (the patcher's `Files`)."""

    def __init__(self, git_dir: Path, commit: str) -> None:
        self.git_dir, self.commit = git_dir, commit

    def _git(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["git", f"--git-dir={self.git_dir}", *args], capture_output=True,
                              timeout=GIT_TIMEOUT, check=False)

    def read_bytes(self, path: str, max_bytes: int | None = None) -> bytes:
        spec = f"{self.commit}:{path}"
        kind = self._git("cat-file", "-t", spec)
        if kind.returncode != 0:
            raise FileNotFoundError(path)
        if kind.stdout.strip() == b"tree":
            raise IsADirectoryError(path)
        data = self._git("cat-file", "blob", spec).stdout
        return data if max_bytes is None else data[:max_bytes]

    def exists(self, path: str) -> bool:
        return self._git("cat-file", "-e", f"{self.commit}:{path}").returncode == 0

    def write_bytes(self, path: str, data: bytes) -> None:
        raise PermissionError(path)

    def remove(self, path: str) -> None:
        raise PermissionError(path)

    def list(self, root: str = ".", glob: str | None = None, limit: int = 1000) -> list[str]:
        return []


def oracle_problem(task: LoadedTask, mirrors: MirrorCache) -> str | None:
    """What is wrong with the task's reference solution, one line, or None."""
    name = task.spec.oracle.patch
    try:
        text = open_task_file(task.task_dir, name, MAX_TASK_ASSET_BYTES).decode("utf-8")
    except FileNotFoundError:
        return f"no reference solution: {name} not found in the task directory"
    except (UnsafeFileError, OSError, UnicodeDecodeError) as exc:
        return f"{name} refused: {exc}"
    try:
        patches = parse_patch(text)
    except PatchError as exc:
        return f"{name} is not a unified diff: {_first_line(exc)}"
    if not patches:
        return f"{name} changes no file"
    url = task.spec.repo.url
    if is_url(url) and not url.startswith("file://"):
        return None  # a remote repository: applied by `validate-tasks --run`
    try:
        source = resolve_source(url, task.task_dir)
        full = mirrors.resolve(source, task.spec.repo.commit)
        mirror, _ = mirrors.ensure_commit(source, full)
        plan_patch(CommitFiles(mirror, full), text)
    except PatchError as exc:
        return f"{name} does not apply at repo.commit {full[:12]}: {_first_line(exc)}"
    except RepoError as exc:  # the loader checks repo.url; the commit may still be missing
        return f"cannot check {name}: {_first_line(exc)}"
    return None


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]
