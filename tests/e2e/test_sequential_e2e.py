"""`--agentbench-sequential`: a real run of scripted agents on a synthetic pack stops as soon as
the anytime-valid test decides, says why in run.json and the summary, exits with the gate's
status, and `agentbench gate --sequential` replays the same answer from the two runs.

The pack (tests/support/tiny_pack.py, local sandbox) has 30 tasks; the scripted agents pass a
task by writing the fix (`write_file value.txt`) or fail it by doing nothing, one script per task
(`script: DIR/{task_id}.yaml`). The baseline passes 27 tasks (90%), the candidate 3 of them
(10%): 80 points lower, with tasks both pass, both fail and only the baseline passes. By
simulation (reporting/sequential_sim.py, 20,000 runs) such a run stops within 30 tasks every
time, at 16 tasks in the median and 20 at the 90th percentile; in seed 7's order, at task 20.
(It was 60 tasks at 90% against 50%: stopped at task 40, twice the attempts for the same proof.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.tiny_pack import Pack, output, run_dirs, run_suite

TASKS = [f"t{i:02d}" for i in range(30)]
BASELINE_PASSES = set(TASKS[:27])
CANDIDATE_PASSES = set(TASKS[:3])
PASS = [{"tool": "write_file", "arguments": {"path": "value.txt", "content": "good\n"}}]
FAIL = [{"tool": "finish", "arguments": {"summary": "gave up"}}]
ROOT = Path(__file__).resolve().parents[2]
# the harness version hashes the working tree, which may change between two runs of a test
SAME_HARNESS = ("--agentbench-sequential-allow-mismatch=harness_version",)


def variant(base: Path, name: str, passes: set[str]) -> Path:
    scripts = base / f"scripts-{name}"
    scripts.mkdir(parents=True)
    for task in TASKS:
        (scripts / f"{task}.yaml").write_text(yaml.safe_dump(PASS if task in passes else FAIL))
    path = base / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "agent": "scripted",
                                    "params": {"script": f"{scripts}/{{task_id}}.yaml"}}))
    return path


@pytest.fixture
def pack(pytester: pytest.Pytester) -> Pack:
    pack = Pack(pytester.path)
    for task in TASKS:
        pack.task(task)
    return pack


def the_run(pytester: pytest.Pytester, name: str) -> Path:
    (found,) = [d for d in run_dirs(pytester) if d.name == name]
    return found


def gate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_agentbench.cli.main", "gate", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_worse_candidate_stops_early_with_regression(pytester: pytest.Pytester,
                                                         pack: Pack) -> None:
    base = pytester.path
    result = run_suite(pytester, f"--agentbench-variant={variant(base, 'base', BASELINE_PASSES)}",
                       "--agentbench-run-name=baseline", "-n", "2")  # two workers: half the time
    assert result.ret == 1, output(result)  # 3 of 30 failed: pytest's rule
    result = run_suite(pytester, f"--agentbench-variant={variant(base, 'cand', CANDIDATE_PASSES)}",
                       "--agentbench-run-name=candidate", "--agentbench-sequential=baseline",
                       "--agentbench-sequential-seed=7", *SAME_HARNESS)
    text = output(result)
    assert result.ret == 1, text  # the gate's REGRESSION
    candidate = the_run(pytester, "candidate")
    seq = json.loads((candidate / "run.json").read_text())["sequential"]
    assert seq["outcome"] == "regression" and seq["seed"] == 7, seq
    assert seq["stopped_run"] is True
    used = seq["tasks_used"]
    assert 5 <= used < len(TASKS), seq  # stopped early
    records = (candidate / "attempts.jsonl").read_text().splitlines()
    assert len(records) == used < len(TASKS)  # one process: the rest never ran
    assert seq["e_regression"] >= 20 and seq["drop_lower"] > 0.05
    # the tasks ran in the recorded order: the first `used` of it are what the test saw
    from pytest_agentbench.reporting.sequential import task_order

    assert seq["order"] == task_order(7, TASKS)[:used]
    assert f"REGRESSION after {used} task(s)" in text
    summary = (candidate / "report_summary.md").read_text()
    assert "## Sequential comparison: REGRESSION" in summary
    assert not (candidate / ".sequential-stop").exists()
    # offline, over the two finished runs: the same answer at the same task
    proc = gate("--baseline", str(the_run(pytester, "baseline")), "--candidate", str(candidate),
                "--sequential", "--format", "json", "--allow-mismatch", "harness_version")
    assert proc.returncode == 1, proc.stderr
    offline = json.loads(proc.stdout)
    assert offline["outcome"] == "regression" and offline["tasks_used"] == used
    assert offline["order"] == seq["order"] and offline["e_regression"] == seq["e_regression"]


def test_a_candidate_equal_to_its_baseline_goes_to_its_end(pytester: pytest.Pytester,
                                                          pack: Pack) -> None:
    base = pytester.path
    first_20 = ("-k", "t0 or t1")  # t00..t19: past the 13 a REGRESSION needs at the least
    run_suite(pytester, f"--agentbench-variant={variant(base, 'base', BASELINE_PASSES)}",
              "--agentbench-run-name=baseline", "-n", "2", *first_20)
    result = run_suite(pytester, f"--agentbench-variant={variant(base, 'same', BASELINE_PASSES)}",
                       "--agentbench-run-name=candidate", "--agentbench-sequential=baseline",
                       *SAME_HARNESS, *first_20)
    seq = json.loads((the_run(pytester, "candidate") / "run.json").read_text())["sequential"]
    # no pair disagrees: no evidence of a drop ever; 20 tasks are too few to show the drop is
    # within 5 points either, so the run goes to its end, INCONCLUSIVE (exit 3)
    assert seq["outcome"] == "inconclusive" and seq["tasks_used"] == 20, seq
    assert seq["e_regression"] == 1.0 and isinstance(seq["seed"], int)
    assert result.ret == 3, output(result)
