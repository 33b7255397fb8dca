"""The bundled custom-verifier suite does what --agentbench-regrade's tests rely on, checked
without the harness: each task's pinned commit fails its failing command, and once the oracle
patch is applied the passing command passes under PYTHONHASHSEED=0 (the grading's seed) and, for
flaky-verifier only, fails under each of 1, 2 and 3 (the first regrades' seeds)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

TASKPACKS = Path(__file__).resolve().parents[2] / "taskpacks"
SUITE = TASKPACKS / "custom-verifier"


def checkout(task_id: str, dest: Path) -> dict[str, str]:
    spec = yaml.safe_load((SUITE / task_id / "task.yaml").read_text())
    bundle = (SUITE / task_id / spec["repo"]["url"]).resolve()
    subprocess.run(["git", "clone", "-q", str(bundle), str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", spec["repo"]["commit"]], check=True)
    validation: dict[str, str] = spec["validation"]
    return validation


def exit_code(command: str, cwd: Path, seed: int) -> int:
    """`command` (a `python -m pytest ...`) with this interpreter, under PYTHONHASHSEED=seed."""
    argv = shlex.split(command)
    assert argv[0] == "python"
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, *argv[1:]], cwd=cwd, env=env,
                          capture_output=True).returncode


@pytest.mark.parametrize("task_id, failing_seeds", [
    ("flaky-verifier", {1, 2, 3}),
    ("stable-verifier", set()),
])
def test_the_passing_command_passes_under_seed_0_and_fails_under_these(
    tmp_path: Path, task_id: str, failing_seeds: set[int]
) -> None:
    repo = tmp_path / "repo"
    validation = checkout(task_id, repo)
    assert exit_code(validation["failing_command"], repo, 0) == 1  # the bug, before the fix
    subprocess.run(["git", "-C", str(repo), "apply", str(SUITE / task_id / "oracle.patch")],
                   check=True)
    assert exit_code(validation["failing_command"], repo, 0) == 0
    codes = {seed: exit_code(validation["passing_command"], repo, seed) for seed in (0, 1, 2, 3)}
    assert codes[0] == 0
    assert {seed for seed, code in codes.items() if code != 0} == failing_seeds, codes


def test_the_bundle_keeps_every_other_suites_branch() -> None:
    heads = subprocess.run(
        ["git", "bundle", "list-heads", str(TASKPACKS / "_shared" / "minilib.bundle")],
        check=True, capture_output=True, text=True).stdout
    branches = {line.split()[1].removeprefix("refs/heads/task/") for line in heads.splitlines()
                if line.split()[1].startswith("refs/heads/task/")}
    tasks = {path.parent.name for path in TASKPACKS.glob("*/*/task.yaml")
             if "minilib.bundle" in path.read_text()}
    assert tasks <= branches, tasks - branches
    assert {"flaky-verifier", "stable-verifier"} <= branches
