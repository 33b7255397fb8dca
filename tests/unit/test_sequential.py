"""The sequential test's pieces (reporting/sequential.py): the order, the bets, the bounds, the
offline replay `agentbench gate --sequential` over synthetic runs, the summary's section, and
`plan`'s expected stopping size."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import pytest_agentbench.reporting.cli as cli
import pytest_agentbench.reporting.sequential as sequential
from pytest_agentbench.reporting.load import ReportError, load_runs
from pytest_agentbench.reporting.plan import plan, render_plan
from tests.support.synthetic import make_record, write_run


def _run(root: Path, name: str, tasks: dict[str, list[bool]], meta: dict | None = None) -> Path:
    records = [make_record(f"run-{name}", task, "custom-dev", name, i, len(outcomes), ok,
                           None if ok else "TESTS_FAILED", 3, 10.0)
               for task, outcomes in tasks.items() for i, ok in enumerate(outcomes)]
    path = write_run(root / name, records, variant=name, run_id=f"run-{name}")
    if meta:
        data = json.loads((path / "run.json").read_text())
        (path / "run.json").write_text(json.dumps({**data, **meta}))
    return path


def test_the_order_is_random_seeded_and_consistent_on_subsets() -> None:
    tasks = [f"t{i:03d}" for i in range(200)]
    order = sequential.task_order(5, tasks)
    assert sorted(order) == tasks and order != tasks
    assert sequential.task_order(5, tasks) == order  # the seed makes it
    assert sequential.task_order(6, tasks) != order
    subset = tasks[::3]
    assert sequential.task_order(5, subset) == [t for t in order if t in set(subset)]


def test_bets_are_predictable_and_capped() -> None:
    x = np.array([1.0, 1.0, -1.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    lm, lp = sequential.bets(x, 0.05)
    assert lm[0] == 0.0  # nothing seen: the first bet is on no drop
    assert ((lm >= 0) & (lm <= sequential.CAP) & (lp >= 0) & (lp <= sequential.CAP)).all()
    assert (lm * lp == 0).all()  # never on both sides at once
    for t in range(1, len(x)):  # a later observation never changes an earlier bet
        changed = x.copy()
        changed[t:] = -1.0
        assert np.array_equal(sequential.bets(changed, 0.05)[0][: t + 1], lm[: t + 1])


def test_bounds_hold_the_decision() -> None:
    x = np.r_[np.ones(40), np.zeros(20)]  # 40 of 60 tasks pass on the baseline only
    d = sequential.decide(x, 0.05, 0.05)
    assert d.outcome == "regression" and d.tasks < 60
    assert d.e_regression >= 20 and d.lower > 0.05 and d.upper >= d.lower
    ok = sequential.decide(np.zeros(400), 0.05, 0.05)  # identical runs: the drop is within 5
    assert ok.outcome == "ok" and ok.upper <= 0.05 and ok.e_ok >= 20
    none = sequential.decide(np.zeros(10), 0.05, 0.05)
    assert none.outcome == "inconclusive" and none.tasks == 10 and none.e_regression == 1.0
    with pytest.raises(ReportError, match="alpha"):
        sequential.decide(x, 0.05, 1.5)


def test_threshold_is_the_smaller_of_max_drop_and_margin() -> None:
    assert sequential.threshold_of(None, None) == 0.05
    assert sequential.threshold_of(0.1, 0.02) == 0.02
    assert sequential.threshold_of(None, 0.1) == 0.1


def _pair(tmp_path: Path, seed: int | None = 11) -> tuple[Path, Path]:
    base = {f"t{i:03d}": [i < 90] for i in range(100)}  # 90%
    cand = {f"t{i:03d}": [i < 50] for i in range(100)}  # 50%
    meta = {"sequential": {"seed": seed}} if seed is not None else None
    return _run(tmp_path, "a", base), _run(tmp_path, "b", cand, meta)


def test_offline_gate_replays_in_the_recorded_order(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _pair(tmp_path)
    code = cli.main(["gate", "--baseline", str(a), "--candidate", str(b), "--sequential",
                     "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["outcome"] == "regression" and data["seed"] == 11
    assert data["order"] == sequential.task_order(11, [f"t{i:03d}" for i in range(100)]
                                                  )[: data["tasks_used"]]
    assert data["tasks_used"] < 100 and data["tasks_available"] == 100
    # the drops it saw: 1 for t050..t089, 0 elsewhere
    assert data["task_drops"] == [1.0 if 50 <= int(t[1:]) < 90 else 0.0 for t in data["order"]]
    assert "recorded order" in data["order_source"]
    # the same answer as decide() over the drops in that order
    full = sequential.task_order(11, [f"t{i:03d}" for i in range(100)])
    d = sequential.decide([1.0 if 50 <= int(t[1:]) < 90 else 0.0 for t in full], 0.05, 0.05)
    assert (d.outcome, d.tasks) == ("regression", data["tasks_used"])


def test_offline_gate_without_a_recorded_order_says_so(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _pair(tmp_path, seed=None)
    code = cli.main(["gate", "--baseline", str(a), "--candidate", str(b), "--sequential",
                     "--seed", "3"])
    out = capsys.readouterr().out
    assert code == 1
    assert "# Sequential regression gate: REGRESSION" in out
    assert "a random order of seed 3: the candidate recorded none" in out


def test_offline_gate_equal_runs_and_bad_input(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    same = {f"t{i:03d}": [i < 60] for i in range(30)}
    a, b = _run(tmp_path, "a", same), _run(tmp_path, "b", same)
    assert cli.main(["gate", "--baseline", str(a), "--candidate", str(b), "--sequential"]) == 3
    assert cli.main(["gate", "--baseline", str(a), "--candidate", str(b), "--sequential",
                     "--inconclusive-ok"]) == 0
    assert cli.main(["gate", "--baseline", str(a), "--candidate", str(b), "--sequential",
                     "--format", "csv"]) == 2
    assert cli.main(["gate", "--baseline", str(a), "--candidate", str(b), "--sequential",
                     "--max-drop", "2"]) == 2
    err = capsys.readouterr().err
    assert "md or json, not csv" in err and "max_drop must be a proportion" in err


def test_only_the_candidates_tasks_count_and_the_summary_section(tmp_path: Path) -> None:
    """A stopped candidate ran a few tasks: the baseline's other tasks are no refusal."""
    base = {f"t{i:03d}": [True] for i in range(100)}
    cand = {t: [False] for t in sequential.task_order(4, base)[:30]}
    a, b = _run(tmp_path, "a", base), _run(tmp_path, "b", cand, {"sequential": {"seed": 4}})
    result = sequential.sequential_gate(*load_runs([a, b]))
    assert result.outcome == "regression" and result.data["tasks_available"] == 30
    text = sequential.summary_section({"sequential": {**result.data, "baseline": str(a)}})
    assert text.startswith("\n## Sequential comparison: REGRESSION")
    assert f"Tasks looked at: {result.data['tasks_used']} of 30" in text
    assert sequential.summary_section({}) == ""


def test_plan_reports_the_expected_stopping_size(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", {f"t{i:03d}": [i < 60] for i in range(100)})
    b = _run(tmp_path, "b", {f"t{i:03d}": [5 <= i < 75] for i in range(100)})
    d = plan(*load_runs([a, b]), effect=0.1)
    seq = d["sequential"]
    assert seq["simulated"] and seq["median_tasks"] < d["tasks"] * 1.5
    assert 0.3 < seq["stopped_by_fixed"] < 1 and seq["stopped_by_cap"] > 0.95
    text = render_plan(d, "md")
    assert f"median stop {seq['median_tasks']} tasks" in text
    assert f"within the fixed {d['tasks']} tasks" in text
    tiny = plan(*load_runs([a, b]), effect=0.002)
    assert tiny["sequential"]["simulated"] is False and math.isfinite(tiny["tasks"])
