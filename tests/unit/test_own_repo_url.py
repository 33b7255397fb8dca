"""Issue 22 item 9: a taskpack inside a git repository may name that repository with a relative
`repo.url` (`../../..`), portable to every clone; anything else outside the taskpacks directory
is still refused, by the loader and again by the source resolver git is given."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from pytest_agentbench.repos.gitcmd import RepoError
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.repos.sources import resolve_source
from pytest_agentbench.tasks.discovery import discover

SUITE = "mine"
GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(path: Path) -> str:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "lib.py").write_text("X = 1\n")
    (path / "sub").mkdir()
    (path / "sub" / "keep.txt").write_text("x\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "one")
    return git(path, "rev-parse", "HEAD")


def add_task(taskpacks: Path, task_id: str, url: str, commit: str) -> Path:
    task_dir = taskpacks / SUITE / task_id
    task_dir.mkdir(parents=True)
    (task_dir / "task.yaml").write_text(yaml.safe_dump({
        "task_spec_version": 1, "id": task_id, "suite": SUITE,
        "repo": {"url": url, "commit": commit},
        "validation": {"failing_command": "false", "passing_command": "true"}}))
    return task_dir


def test_a_taskpack_may_name_the_repository_it_lives_in(tmp_path: Path) -> None:
    project = tmp_path / "project"
    commit = make_repo(project)
    make_repo(tmp_path / "other")
    taskpacks = project / "taskpacks"
    own = add_task(taskpacks, "own", "../../..", commit)
    own_git = add_task(taskpacks, "own-git-dir", "../../../.git", commit)
    sub = add_task(taskpacks, "subdir", "../../../sub", commit)
    other = add_task(taskpacks, "sibling", "../../../../other", commit)
    linked = add_task(taskpacks, "linked", "repo", commit)
    (linked / "repo").symlink_to(tmp_path / "other")

    loaded = discover(taskpacks, [SUITE])
    assert sorted(t.id for t in loaded.tasks) == ["own", "own-git-dir"]
    lines = sorted(str(p) for p in loaded.problems)
    assert len(lines) == 3, lines
    assert all("repo.url: resolves outside the taskpacks directory" in line for line in lines)
    assert all("or ../../.. (the git repository holding it)" in line for line in lines), lines

    assert resolve_source("../../..", own) == str(project)
    assert resolve_source("../../../.git", own_git) == str(project / ".git")
    for url, task_dir in (("../../../sub", sub), ("../../../../other", other),
                          ("repo", linked)):
        with pytest.raises(RepoError, match="outside the taskpacks directory"):
            resolve_source(url, task_dir)

    # and git really checks the task's commit out of the project's own repository
    checkout = MirrorCache(tmp_path / "cache", git_timeout=60).checkout(
        resolve_source("../../..", own), commit, tmp_path / "ws")
    assert checkout.commit == commit and (tmp_path / "ws" / "lib.py").read_text() == "X = 1\n"


def test_without_a_containing_repository_the_old_rule_stands(tmp_path: Path) -> None:
    commit = make_repo(tmp_path / "src")
    taskpacks = tmp_path / "plain" / "taskpacks"
    task_dir = add_task(taskpacks, "up", "../../../../src", commit)
    loaded = discover(taskpacks, [SUITE])
    assert not loaded.tasks
    [problem] = loaded.problems
    assert str(problem).endswith("a relative path may name a bundle or repository inside it")
    with pytest.raises(RepoError, match="outside the taskpacks directory"):
        resolve_source("../../../../src", task_dir)
