#!/usr/bin/env python3
"""Regenerate the bundled taskpacks' repository and reference fixes, deterministically.

Two small libraries, each a git bundle in `taskpacks/_shared/`: `minilib.bundle` (sources in
taskpack_sources.py; custom-dev and custom-heldout) and `tallylib.bundle`, an installable package
(taskpack_tallylib.py; custom-setups). A library's `main` branch is correct; every task has a
branch `task/<id>` with one commit that breaks something (and, for a task fixed later, the
commits of its `then` list on top). A task pins that commit, and its
`oracle.patch` is the reverse diff of the non-test files. Fixed author and dates make the commit
ids stable, so task.yaml files can pin them; a library's ids do not depend on the other's.

    python scripts/make_taskpacks.py          # rewrite bundle + oracle patches, print commit ids
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import taskpack_sources  # noqa: E402
import taskpack_tallylib  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / "taskpacks" / "_shared"
# name -> (files of `main`, tasks, first commit's message)
LIBRARIES = {
    "minilib": (taskpack_sources.BASE_FILES, taskpack_sources.TASKS,
                "minilib: a tiny library for agentbench taskpacks"),
    "tallylib": (taskpack_tallylib.BASE_FILES, taskpack_tallylib.TASKS,
                 "tallylib: an installable library for agentbench taskpacks"),
}
ENV = {
    **os.environ, "GIT_AUTHOR_NAME": "agentbench", "GIT_AUTHOR_EMAIL": "tasks@agentbench.invalid",
    "GIT_COMMITTER_NAME": "agentbench", "GIT_COMMITTER_EMAIL": "tasks@agentbench.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=ENV).stdout


def write(repo: Path, files: dict[str, str | None]) -> None:
    for rel, content in files.items():
        path = repo / rel
        if content is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)


def oracle_patch(repo: Path, task: dict, base_files: dict[str, str | None]) -> str:
    """The diff from the buggy commit to the fixed state: `fix` files if given, else the base
    version of every non-test file the bug touched (made on a branch that is not bundled)."""
    fix = task.get("fix") or {path: base_files.get(path) for path in task["bug"]
                              if not path.startswith("tests/")}
    git(repo, "checkout", "-q", "-b", "scratch-fix")
    write(repo, fix)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "fix")
    patch = git(repo, "diff", "HEAD~1", "HEAD")
    git(repo, "checkout", "-q", "-")
    git(repo, "branch", "-q", "-D", "scratch-fix")
    return patch


def pin_commit(task_yaml: Path, commit: str) -> None:
    """Point an existing task.yaml at the regenerated commit (new tasks: write task.yaml first)."""
    if task_yaml.is_file():
        text = re.sub(r"(?m)^(  commit: )[0-9a-f]+$", rf"\g<1>{commit}", task_yaml.read_text())
        task_yaml.write_text(text)


def make_library(name: str, tmp: Path) -> None:
    base_files, tasks, message = LIBRARIES[name]
    repo = tmp / name
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, base_files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    base = git(repo, "rev-parse", "HEAD").strip()
    print(f"{name} base {base}")
    for task_id, task in tasks.items():
        git(repo, "checkout", "-q", "-b", f"task/{task_id}", base)
        write(repo, task["bug"])
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"task {task_id}: {task['title']}")
        for message, files in task.get("then", []):  # later fixes to the task, pinned last
            write(repo, files)
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "-m", f"task {task_id}: {message}")
        commit = git(repo, "rev-parse", "HEAD").strip()
        print(f"{task_id} {commit}")
        suite_dir = ROOT / "taskpacks" / task["suite"] / task_id
        if task.get("oracle", True):
            suite_dir.mkdir(parents=True, exist_ok=True)
            (suite_dir / "oracle.patch").write_text(oracle_patch(repo, task, base_files))
        pin_commit(suite_dir / "task.yaml", commit)
    git(repo, "checkout", "-q", "main")
    SHARED.mkdir(parents=True, exist_ok=True)
    git(repo, "bundle", "create", str(SHARED / f"{name}.bundle"), "--all")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name in LIBRARIES:
            make_library(name, Path(tmp))


if __name__ == "__main__":
    main()
