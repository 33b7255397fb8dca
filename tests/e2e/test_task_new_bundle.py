"""`agentbench task new` with taskpacks outside the repository: the repository travels as a git
bundle in `<taskpacks>/_shared/<suite>.bundle` that keeps every task's bug and fix commits (a
second task adds to it, the first still checks out). Local
sandbox (the Docker path is the newcomer walkthrough's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from pytest_agentbench.harvest.task_yaml import documented
from tests.support.plugin_runs import run_env
from tests.support.tiny_project import make_project

BIN = Path(sys.executable).parent


def task_new(repo: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(BIN / "agentbench"), "task", "new", "--sandbox", "local", *args],
                          cwd=repo, env=run_env(home), capture_output=True, text=True,
                          timeout=600, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_tasks_outside_the_repository_share_a_bundle(tmp_path: Path) -> None:
    history = make_project(tmp_path / "lib")
    out, home = tmp_path / "packs", tmp_path / "home"
    refused = task_new(history.repo, home, "--out", str(out), "--suite", "s", "--repo-ref",
                       "path")
    assert refused.returncode == 1 and "is not inside the repository" in refused.stderr
    first = task_new(history.repo, home, "--out", str(out), "--suite", "s", history.commits[2])
    assert first.returncode == 0, first.stderr
    second = task_new(history.repo, home, "--out", str(out), "--suite", "s")
    assert second.returncode == 0, second.stderr
    bundle = out / "_shared" / "s.bundle"
    heads = subprocess.run(["git", "bundle", "list-heads", str(bundle)], capture_output=True,
                           text=True, check=True).stdout.split()
    ids = [f"s-{history.commits[i][:10]}" for i in (2, 4)]
    assert sorted(h for h in heads if h.startswith("refs/")) == sorted(
        f"refs/agentbench/tasks/{i}/{kind}" for i in ids for kind in ("bug", "fix"))
    for task_id in ids:
        spec = yaml.safe_load((out / "s" / task_id / "task.yaml").read_text())
        assert spec["repo"]["url"] == "../../_shared/s.bundle"
    # both tasks still valid against the rewritten bundle (their oracle applies at their commit)
    static = subprocess.run([str(BIN / "agentbench"), "validate-tasks", "--suite", "s",
                             "--taskpacks", str(out)], env=run_env(home), capture_output=True,
                            text=True, timeout=300, check=False)
    assert static.returncode == 0 and static.stdout.count("oracle.patch applies") == 2, (
        static.stdout + static.stderr)
    assert not list(tmp_path.glob(".agentbench-task-new-*"))


def test_the_commented_task_yaml_loads_back_to_the_spec() -> None:
    spec = {"task_spec_version": 1, "id": "t-1", "suite": "s",
            "description": "Line one: it breaks\n\n- on `x: y`\n# not a comment",
            "labels": ["task-new", "bugfix"], "repo": {"url": "../../..", "commit": "abc1234"},
            "environment": {"network_policy": "none"}, "setup": {"commands": ["pip install x"]},
            "validation": {"failing_command": "python -m pytest -q 't.py::a b'",
                           "passing_command": "python -m pytest -q",
                           "expected_failing_tests": ["t.py::a b"], "hidden_tests": "tests.patch"},
            "oracle": {"patch": "oracle.patch"}}
    text = documented(spec)
    assert yaml.safe_load(text) == spec
    assert "cpu_limit 2, mem_limit_mb 4096" in text  # the schema's defaults, not the example's
    assert all(len(line) <= 100 for line in text.splitlines())
