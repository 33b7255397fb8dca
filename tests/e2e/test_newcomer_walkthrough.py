"""Issue 22's newcomer walkthrough, end to end as a user types it, in Docker: a fresh git
repository (a tiny package, its tests, two bug/fix pairs) -> `agentbench task new` twice (one
fix whose tests were already there, one that adds a test: hidden tests) -> `agentbench
validate-tasks --run` -> named runs A (nop) and B (oracle) with `-n 2` -> `agentbench report
paired A B` -> `agentbench gate`; every exit status as the README documents it, and no absolute
path in any written task file. Then the refusals: a change that cannot be a task writes nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.harvest_history import History
from tests.support.plugin_runs import run_env
from tests.support.tiny_project import make_project

BIN = Path(sys.executable).parent
SUITE = "tiny"

def agentbench(cwd: Path, env: dict[str, str], *args: str,
               timeout: float = 900) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(BIN / "agentbench"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def pytest_run(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "python"), "-m", "pytest", "-p", "no:cacheprovider",
                           "--agentbench-suite", SUITE, "-n", "2", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900, check=False)


def text_of(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout[-4000:] + done.stderr[-4000:]


@pytest.fixture(scope="module")
def walkthrough(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("newcomer")
    history = make_project(base / "tinylib")
    repo, env = history.repo, run_env(base / "home")
    first = agentbench(repo, env, "task", "new", "--suite", SUITE,
                       "--bug", history.commits[1], "--fix", history.commits[2])
    second = agentbench(repo, env, "task", "new", "--suite", SUITE)
    return {"history": history, "repo": repo, "env": env, "first": first, "second": second}


def test_task_new_writes_two_portable_validated_tasks(walkthrough: dict[str, Any]) -> None:
    repo: Path = walkthrough["repo"]
    history: History = walkthrough["history"]
    for done in (walkthrough["first"], walkthrough["second"]):
        assert done.returncode == 0, text_of(done)
        assert "(oracle passed, nop failed)" in done.stdout
    suite_dir = repo / "taskpacks" / SUITE
    mean_task = suite_dir / f"{SUITE}-{history.commits[2][:10]}"
    clamp_task = suite_dir / f"{SUITE}-{history.commits[4][:10]}"
    assert sorted(p.name for p in suite_dir.iterdir()) == sorted([mean_task.name,
                                                                  clamp_task.name])
    mean_spec = yaml.safe_load((mean_task / "task.yaml").read_text())
    clamp_spec = yaml.safe_load((clamp_task / "task.yaml").read_text())
    assert mean_spec["repo"] == {"url": "../../..", "commit": history.commits[1]}
    assert mean_spec["description"] == "The mean of [1, 2, 3] comes out as 1.5"
    assert mean_spec["validation"]["expected_failing_tests"] == ["tests/test_tiny.py::test_mean"]
    assert "hidden_tests" not in mean_spec["validation"]
    assert not (mean_task / "tests.patch").exists()
    assert clamp_spec["repo"] == {"url": "../../..", "commit": history.commits[3]}
    assert clamp_spec["validation"]["hidden_tests"] == "tests.patch"
    assert "+def test_clamp_low():" in (clamp_task / "tests.patch").read_text()
    oracle = (clamp_task / "oracle.patch").read_text()
    assert "+    return max(lo, min(x, hi))" in oracle and "tests/" not in oracle
    # commented for people, and no file names a path of this machine
    assert "# What the agent is told" in (clamp_task / "task.yaml").read_text()
    for path in suite_dir.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert str(repo) not in text and "/tmp" not in text and str(Path.home()) not in text
    assert not list(repo.glob(".agentbench-task-new-*")), "the staging directory is gone"


def test_validate_runs_pair_and_gate(walkthrough: dict[str, Any]) -> None:
    repo, env = walkthrough["repo"], walkthrough["env"]
    assert walkthrough["second"].returncode == 0, text_of(walkthrough["second"])
    # two of the exploit agent's tries (all 18 take minutes; tests/e2e/test_anticheat.py has them)
    validated = agentbench(repo, env, "validate-tasks", "--suite", SUITE, "--run",
                           "--exploit", "conftest", "--exploit", "edit-tests")
    assert validated.returncode == 0, text_of(validated)
    assert validated.stdout.count("OK ") == 2 and "2 accepted, 0 rejected" in validated.stdout
    nop = pytest_run(repo, env, "--agentbench-run-name=A", "--agentbench-variant=nop")
    assert nop.returncode == 1, text_of(nop)  # the agent failed both tasks: pytest's failures
    oracle = pytest_run(repo, env, "--agentbench-run-name=B", "--agentbench-variant=oracle")
    assert oracle.returncode == 0, text_of(oracle)
    versions = set()
    for name, passed in (("A", False), ("B", True)):
        records = [json.loads(line) for line in
                   (repo / "reports" / "runs" / name / "attempts.jsonl").read_text().splitlines()]
        assert len(records) == 2 and all(r["result"]["passed"] is passed for r in records)
        versions |= {r["harness_version"] for r in records}
    # pairing refuses two harness versions: only a checkout of the harness that changed between
    # the two runs (a shared development tree) differs, never a user's, nor CI's
    pairing = ("--allow-mismatch", "harness_version") if len(versions) > 1 else ()
    paired = agentbench(repo, env, "report", "paired", "--run-a", "A", "--run-b", "B", *pairing)
    assert paired.returncode == 0, text_of(paired)
    # two tasks cannot show "no drop above 5 points" (INCONCLUSIVE, exit 3): as documented,
    # --inconclusive-ok makes that 0, and the other way round is a regression
    gate = agentbench(repo, env, "gate", "--baseline", "A", "--candidate", "B",
                      "--max-drop", "0.05", *pairing)
    assert gate.returncode == 3 and "INCONCLUSIVE" in gate.stdout, text_of(gate)
    gate = agentbench(repo, env, "gate", "--baseline", "A", "--candidate", "B",
                      "--max-drop", "0.05", "--inconclusive-ok", *pairing)
    assert gate.returncode == 0, text_of(gate)
    worse = agentbench(repo, env, "gate", "--baseline", "B", "--candidate", "A",
                       "--max-drop", "0.05", *pairing)
    assert worse.returncode == 1 and "REGRESSION" in worse.stdout, text_of(worse)


def test_a_change_that_cannot_be_a_task_writes_nothing(walkthrough: dict[str, Any]) -> None:
    repo, env, history = walkthrough["repo"], walkthrough["env"], walkthrough["history"]
    before = sorted(p.relative_to(repo) for p in (repo / "taskpacks").rglob("*"))
    refusals = {
        # a bug the tests do not catch: nothing fails before the fix
        ("task", "new", "--suite", SUITE, history.commits[3], "--id", "no-failing"): (
            1, "no test fails before the fix"),
        ("task", "new", "--suite", SUITE, history.commits[2], "--id", "leaky", "--statement",
         "use return sum(xs) / len(xs)"): (2, "--statement repeats the fix's code"),
        ("task", "new", "--suite", SUITE, "no-such-rev"): (2, "no such commit"),
        ("task", "new", "--suite", SUITE): (1, "exists (pass --force"),
    }
    for args, (code, message) in refusals.items():
        done = agentbench(repo, env, *args)
        assert done.returncode == code, (args, text_of(done))
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert sorted(p.relative_to(repo) for p in (repo / "taskpacks").rglob("*")) == before
    assert not list(repo.glob(".agentbench-task-new-*"))
