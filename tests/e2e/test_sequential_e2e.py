"""`--agentbench-sequential`: a real run of scripted agents on a synthetic pack stops as soon as
the anytime-valid test decides, says why in run.json and the summary, exits with the gate's
status, and `agentbench gate --sequential` replays the same answer from the two runs.

The pack, agents and the one baseline run they compare against: tests/support/sequential_runs.py
(30 tasks; the baseline passes 90%, the candidate 10%: 80 points lower). By simulation
(reporting/sequential_sim.py, 20,000 runs) such a run stops within 30 tasks every time, at 16
tasks in the median and 20 at the 90th percentile; in seed 7's order, at task 20. (It was 60
tasks at 90% against 50%, a baseline run per test: stopped at task 40, twice the attempts for the
same proof.)
"""

from __future__ import annotations

import json

import pytest

from tests.support.sequential_runs import (
    BASELINE_PASSES,
    CANDIDATE_PASSES,
    SHARED_BASELINE,
    TASKS,
    Baseline,
    gate,
    the_run,
)
from tests.support.tiny_pack import output

pytestmark = SHARED_BASELINE


def test_a_worse_candidate_stops_early_with_regression(pytester: pytest.Pytester,
                                                         sequential_baseline: Baseline) -> None:
    result = sequential_baseline.candidate(pytester, "candidate", CANDIDATE_PASSES,
                                           "--agentbench-sequential-seed=7")
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
    proc = gate("--baseline", str(sequential_baseline.run_dir), "--candidate", str(candidate),
                "--sequential", "--format", "json", "--allow-mismatch", "harness_version")
    assert proc.returncode == 1, proc.stderr
    offline = json.loads(proc.stdout)
    assert offline["outcome"] == "regression" and offline["tasks_used"] == used
    assert offline["order"] == seq["order"] and offline["e_regression"] == seq["e_regression"]


def test_a_candidate_equal_to_its_baseline_goes_to_its_end(pytester: pytest.Pytester,
                                                          sequential_baseline: Baseline) -> None:
    first_20 = ("-k", "t0 or t1")  # t00..t19: past the 13 a REGRESSION needs at the least
    result = sequential_baseline.candidate(pytester, "candidate", BASELINE_PASSES, *first_20)
    seq = json.loads((the_run(pytester, "candidate") / "run.json").read_text())["sequential"]
    # no pair disagrees: no evidence of a drop ever; 20 tasks are too few to show the drop is
    # within 5 points either, so the run goes to its end, INCONCLUSIVE (exit 3)
    assert seq["outcome"] == "inconclusive" and seq["tasks_used"] == 20, seq
    assert seq["e_regression"] == 1.0 and isinstance(seq["seed"], int)
    assert result.ret == 3, output(result)
