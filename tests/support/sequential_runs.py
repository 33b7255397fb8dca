"""The pack, scripted agents and helpers of the `--agentbench-sequential` tests
(tests/e2e/test_sequential_e2e.py, test_sequential_workers.py), and their one shared baseline.

The pack (tests/support/tiny_pack.py, local sandbox) has 30 tasks; the scripted agents pass a
task by writing the fix (`write_file value.txt`) or fail it by doing nothing, one script per task
(`script: DIR/{task_id}.yaml`). The baseline passes 27 tasks (90%), the candidate 3 of them
(10%): 80 points lower, with tasks both pass, both fail and only the baseline passes.

`sequential_baseline` runs the baseline once per worker (a `python -m pytest -n 2` subprocess,
the user's command) in a directory of its own (registered in tests/conftest.py, so one
fixture for every module); the tests that compare against it carry
`SHARED_BASELINE`, one xdist group, so one worker makes it once and runs them all. Each test runs
its candidate in its own pytester directory against that pack (`--agentbench-taskpacks`) and that
run directory (`--agentbench-sequential=<path>`): nothing of the baseline's is written to.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

if TYPE_CHECKING:
    from tests.support.tiny_pack import Pack

# tests/support/tiny_pack.py (pandas under it) is imported where it is used: tests/conftest.py
# imports this module for the fixture, and `-m unit` should not pay a second for pandas.

TASKS = [f"t{i:02d}" for i in range(30)]
BASELINE_PASSES = set(TASKS[:27])
CANDIDATE_PASSES = set(TASKS[:3])
PASS = [{"tool": "write_file", "arguments": {"path": "value.txt", "content": "good\n"}}]
FAIL = [{"tool": "finish", "arguments": {"summary": "gave up"}}]
ROOT = Path(__file__).resolve().parents[2]
# the harness version hashes the working tree, which may change between two runs of a test
SAME_HARNESS = ("--agentbench-sequential-allow-mismatch=harness_version",)
SHARED_BASELINE = pytest.mark.xdist_group("sequential-baseline")


def variant(base: Path, name: str, passes: set[str]) -> Path:
    scripts = base / f"scripts-{name}"
    scripts.mkdir(parents=True)
    for task in TASKS:
        (scripts / f"{task}.yaml").write_text(yaml.safe_dump(PASS if task in passes else FAIL))
    path = base / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "agent": "scripted",
                                    "params": {"script": f"{scripts}/{{task_id}}.yaml"}}))
    return path


def make_pack(root: Path) -> Pack:
    from tests.support.tiny_pack import Pack

    pack = Pack(root)
    for task in TASKS:
        pack.task(task)
    return pack


@pytest.fixture
def pack(pytester: pytest.Pytester) -> Pack:
    return make_pack(pytester.path)


def the_run(pytester: pytest.Pytester, name: str) -> Path:
    from tests.support.tiny_pack import run_dirs

    (found,) = [d for d in run_dirs(pytester) if d.name == name]
    return found


def gate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_agentbench.cli.main", "gate", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


@dataclass(frozen=True)
class Baseline:
    pack: Pack
    run_dir: Path  # its run directory, named "baseline"

    def candidate(self, pytester: pytest.Pytester, name: str, passes: set[str],
                  *args: str) -> pytest.RunResult:
        """A candidate run named `name` in pytester's directory, compared to this baseline."""
        from tests.support.tiny_pack import run_suite

        return run_suite(pytester, f"--agentbench-variant={variant(pytester.path, name, passes)}",
                         f"--agentbench-taskpacks={self.pack.root}",
                         f"--agentbench-run-name={name}",
                         f"--agentbench-sequential={self.run_dir}", *SAME_HARNESS, *args)


@pytest.fixture(scope="session")
def sequential_baseline(tmp_path_factory: pytest.TempPathFactory) -> Baseline:
    from tests.support.plugin_runs import run_env
    from tests.support.tiny_pack import SUITE, attempts

    root = tmp_path_factory.mktemp("sequential-baseline")
    pack = make_pack(root)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--agentbench-sandbox",
               "local", "--agentbench-suite", SUITE, "--agentbench-run-name=baseline",
               f"--agentbench-variant={variant(root, 'base', BASELINE_PASSES)}", "-n", "2"]
    done = subprocess.run(command, cwd=root, env=run_env(root / "home"), capture_output=True,
                          text=True, timeout=600)
    text = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 1, text  # 3 of 30 failed: pytest's rule
    run_dir = root / "reports" / "runs" / "baseline"
    passed = {r["task_id"] for r in attempts(run_dir) if r["result"]["passed"]}
    assert passed == BASELINE_PASSES, text
    return Baseline(pack, run_dir)
