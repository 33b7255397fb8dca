"""`--agentbench-sequential` with two xdist workers, and against a baseline made at another
`--agentbench-resources-scale` (the pack, agents, helpers and shared baseline run of
tests/support/sequential_runs.py)."""

from __future__ import annotations

import json

import pytest

from tests.support.sequential_runs import (
    BASELINE_PASSES,
    CANDIDATE_PASSES,
    SAME_HARNESS,
    SHARED_BASELINE,
    TASKS,
    Baseline,
    gate,
    pack,
    the_run,
    variant,
)
from tests.support.tiny_pack import Pack, output, run_dirs, run_suite

__all__ = ["pack"]  # the fixture


@SHARED_BASELINE
def test_a_worse_candidate_on_two_workers_stops_early_with_regression(
        pytester: pytest.Pytester, sequential_baseline: Baseline) -> None:
    """The controller decides as the workers' tasks finish, in the recorded order; the tasks
    in flight when it stops may still be recorded, none is started after."""
    result = sequential_baseline.candidate(pytester, "candidate", CANDIDATE_PASSES,
                                           "--agentbench-sequential-seed=7", "-n", "2")
    text = output(result)
    assert result.ret == 1, text  # the gate's REGRESSION
    candidate = the_run(pytester, "candidate")
    seq = json.loads((candidate / "run.json").read_text())["sequential"]
    assert seq["outcome"] == "regression" and seq["stopped_run"] is True, seq
    used = seq["tasks_used"]
    assert 5 <= used < len(TASKS), seq
    recorded = [json.loads(line)["task_id"]
                for line in (candidate / "attempts.jsonl").read_text().splitlines()]
    # the decision's tasks, and at most the few the two workers had in hand when it came
    assert set(seq["order"]) <= set(recorded) and used <= len(recorded) <= used + 4 < len(TASKS)
    from pytest_agentbench.reporting.sequential import task_order

    assert seq["order"] == task_order(7, TASKS)[:used]
    assert f"REGRESSION after {used} task(s)" in text
    proc = gate("--baseline", str(sequential_baseline.run_dir), "--candidate", str(candidate),
                "--sequential", "--format", "json", "--allow-mismatch", "harness_version")
    assert proc.returncode == 1, proc.stderr
    offline = json.loads(proc.stdout)
    assert offline["tasks_used"] == used and offline["order"] == seq["order"]


def test_a_baseline_at_another_resource_scale_is_refused_before_anything_runs(
        pytester: pytest.Pytester, pack: Pack) -> None:
    base = pytester.path
    few = ("-k", "t00 or t01 or t02")
    run_suite(pytester, f"--agentbench-variant={variant(base, 'base', BASELINE_PASSES)}",
              "--agentbench-run-name=baseline", *few)
    cand = f"--agentbench-variant={variant(base, 'cand', CANDIDATE_PASSES)}"
    result = run_suite(pytester, cand, "--agentbench-run-name=half",
                       "--agentbench-sequential=baseline", "--agentbench-resources-scale=0.5",
                       *SAME_HARNESS, *few)
    lines = [line for line in result.errlines if line.strip()]
    assert result.ret == 4, output(result)
    assert lines == ["ERROR: --agentbench-sequential baseline: the baseline ran at "
                     "--agentbench-resources-scale 1, this run at 0.5: pass "
                     "--agentbench-sequential-allow-mismatch=resources to compare them"]
    assert "half" not in [d.name for d in run_dirs(pytester)]  # no run was started
    result = run_suite(pytester, cand, "--agentbench-run-name=half-allowed",
                       "--agentbench-sequential=baseline", "--agentbench-resources-scale=0.5",
                       "--agentbench-sequential-allow-mismatch=resources", *SAME_HARNESS, *few)
    seq = json.loads((the_run(pytester, "half-allowed") / "run.json").read_text())["sequential"]
    assert seq["outcome"] != "refused" and seq["tasks_used"] == 3, (seq, output(result))
