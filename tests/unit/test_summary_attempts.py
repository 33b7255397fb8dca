"""The run summary with several attempts per task (issue 14.2 and 14.4): per-task rates, pass^k
beside pass@k, the interval clustered by task as the headline, cost per solved task with its
interval, and hardest tasks that exclude tasks at 100 %."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import statsmodels.api as sm
from statsmodels.stats.proportion import proportion_confint

import pytest_agentbench.reporting.render as render
from pytest_agentbench.reporting.load import load_run
from pytest_agentbench.reporting.summary import summarize
from pytest_agentbench.schemas.records import AttemptRecord
from tests.support.synthetic import make_record, write_run


def rec(task: str, attempt: int, attempts: int, passed: bool, cost: float | None = 0.01,
        reason: str | None = None) -> dict[str, Any]:
    r = make_record("run-k", task, "custom-dev", "v", attempt, attempts, passed,
                    None if passed else reason or "TESTS_FAILED", steps=2, duration=5.0)
    r["usage"]["cost_usd"] = cost
    AttemptRecord.model_validate(r)
    return r


def outcomes_run(tmp_path: Path, outcomes: dict[str, list[bool]], name: str = "k",
                 cost: float | None = 0.01) -> Path:
    records = [rec(task, i, len(seq), ok, cost) for task, seq in outcomes.items()
               for i, ok in enumerate(seq)]
    return write_run(tmp_path / name, records, variant=name, run_id=f"run-{name}")


THREE = {"t1": [False, False, True], "t2": [False, False, False], "t3": [True, True, True]}


def test_pass_hat_k_beside_pass_at_k(tmp_path: Path) -> None:
    s = summarize(load_run(outcomes_run(tmp_path, THREE))).data
    rows = {r["k"]: r for r in s["pass_at_k"]}
    assert rows[1]["pass_hat_k"] == pytest.approx((1 / 3 + 0 + 1) / 3)
    assert rows[2]["pass_hat_k"] == pytest.approx((0 + 0 + 1) / 3)  # C(1,2)=0, C(3,2)/C(3,2)
    assert rows[3]["pass_hat_k"] == pytest.approx(1 / 3)
    assert rows[2]["value"] == pytest.approx((2 / 3 + 0 + 1) / 3)  # pass@k unchanged
    assert all(r["tasks"] == 3 for r in s["pass_at_k"])


def test_per_task_rates_with_wilson_intervals(tmp_path: Path) -> None:
    s = summarize(load_run(outcomes_run(tmp_path, THREE))).data
    by_task = {r["task_id"]: r for r in s["tasks"]}
    assert [r["task_id"] for r in s["tasks"]] == ["t1", "t2", "t3"]
    t1 = by_task["t1"]
    assert (t1["attempts"], t1["passed"], t1["rate"]) == (3, 1, pytest.approx(1 / 3))
    assert (t1["ci_low"], t1["ci_high"]) == pytest.approx(
        proportion_confint(1, 3, method="wilson"), abs=1e-12)
    assert by_task["t3"]["ci_high"] == 1.0


def test_clustered_interval_is_the_headline_and_equals_statsmodels(tmp_path: Path) -> None:
    outcomes = {"t1": [False, False, True], "t2": [False, True], "t3": [True, True, True, False],
                "t4": [False], "t5": [True, True]}
    s = summarize(load_run(outcomes_run(tmp_path, outcomes))).data
    cl = s["pass_rate_clustered"]
    y = np.array([float(v) for seq in outcomes.values() for v in seq])
    groups = np.array([i for i, seq in enumerate(outcomes.values()) for _ in seq])
    fit = sm.OLS(y, np.ones((len(y), 1))).fit(cov_type="cluster", cov_kwds={"groups": groups},
                                              use_t=True)  # t, 4 degrees of freedom
    assert cl["method"] == "cr1" and cl["tasks"] == 5 and cl["attempts"] == 12
    assert cl["se"] == pytest.approx(float(fit.bse[0]), abs=1e-9)
    low, high = fit.conf_int(alpha=0.05)[0]
    assert (cl["ci_low"], cl["ci_high"]) == pytest.approx((max(0, low), min(1, high)), abs=1e-9)
    assert s["rules"]["headline_interval"] == "pass_rate_clustered"
    wilson = proportion_confint(7, 12, method="wilson")  # the per-attempt figure stays
    assert (s["pass_rate"]["ci_low"], s["pass_rate"]["ci_high"]) == pytest.approx(wilson)
    md = render.summary_markdown(summarize(load_run(tmp_path / "k")))
    assert "Clustered by task (5 tasks, up to 4 attempts each)" in md
    assert "headline interval" in md and "| k | pass@k | pass^k |" in md
    assert "## Per-task pass rates" in md and "2 always passed" not in md
    assert "1 always passed, 3 sometimes, 1 never" in md


def test_one_attempt_per_task_keeps_wilson(tmp_path: Path) -> None:
    s = summarize(load_run(outcomes_run(tmp_path, {"a": [True], "b": [False]}))).data
    assert s["pass_rate_clustered"] is None and s["rules"]["headline_interval"] == "pass_rate"
    assert s["tasks"] == [] and s["pass_at_k"] == []
    md = render.summary_markdown(summarize(load_run(tmp_path / "k")))
    assert "Clustered by task" not in md and "Per-task pass rates" not in md


def test_hardest_tasks_lists_only_tasks_that_failed(tmp_path: Path) -> None:
    outcomes = {"ok1": [True, True], "ok2": [True], "half": [True, False], "bad": [False, False]}
    s = summarize(load_run(outcomes_run(tmp_path, outcomes))).data
    hardest = s["hardest_tasks"]
    assert [r["task_id"] for r in hardest] == ["bad", "half"]
    assert hardest[0]["top_reason"] == "TESTS_FAILED" and hardest[1]["rate"] == 0.5
    everything = summarize(load_run(outcomes_run(tmp_path, {"a": [True], "b": [True]}, "all")))
    assert everything.data["hardest_tasks"] == []


def test_cost_per_solved_task_with_interval(tmp_path: Path) -> None:
    s = summarize(load_run(outcomes_run(tmp_path, THREE, cost=0.02))).data
    cpp = s["usage"]["cost_per_pass"]
    assert cpp["value"] == pytest.approx(9 * 0.02 / 4)
    assert cpp["value"] == pytest.approx(s["usage"]["cost_per_pass_usd"])
    assert cpp["method"] == "cluster_bootstrap_percentile" and cpp["seed"] == 0
    assert cpp["ci_low"] <= cpp["value"]  # ci_high may be unbounded: 3 tasks, 1 solved often
    again = summarize(load_run(tmp_path / "k")).data["usage"]["cost_per_pass"]
    assert again == cpp  # seeded
    md = render.summary_markdown(summarize(load_run(tmp_path / "k")))
    assert "cost per solved task, 95% CI" in md


def test_cost_per_solved_task_none_safe(tmp_path: Path) -> None:
    no_pass = summarize(load_run(outcomes_run(tmp_path, {"a": [False, False]}, "np"))).data
    assert no_pass["usage"]["cost_per_pass"]["value"] is None
    no_cost = summarize(load_run(outcomes_run(tmp_path, THREE, "nc", cost=None))).data
    assert no_cost["usage"]["cost_per_pass"]["value"] is None
    for name in ("np", "nc"):
        summary = summarize(load_run(tmp_path / name))
        md = render.summary_markdown(summary)
        assert "cost per solved task" not in md
        json.loads(render.render_summary(summary, "json"))
    empty = summarize(load_run(write_run(tmp_path / "empty", []))).data
    assert empty["usage"]["cost_per_pass"]["value"] is None and empty["tasks"] == []
    assert empty["pass_rate_clustered"] is None and empty["hardest_tasks"] == []


def test_scope_table_equals_a_pandas_groupby(tmp_path: Path) -> None:
    """The scopes CSV (bincounts and sorted medians) against pandas' groupby, per task."""
    records = [rec(f"t{t}", i, 4, passed=(t + i) % 3 != 0, cost=None if i == 1 else 0.01 * i)
               for t in range(5) for i in range(4)]
    for number, r in enumerate(records):  # distinct durations; even numbers of passes too
        r["duration_sec"] = 1.0 + (number * 37) % 11
    run = load_run(write_run(tmp_path / "s", records))
    table = summarize(run).tables["scopes"].set_index("scope")
    df = run.attempts.assign(ok=lambda d: d["passed"] & (d["category"] == "scored"))
    ref = df.groupby("task_id").agg(
        attempts=("passed", "size"), passed=("ok", "sum"), tokens=("total_tokens", "sum"),
        cost=("cost_usd", "sum"),
        ttp=("duration_sec", lambda s: s[df.loc[s.index, "ok"]].median()))
    for task, row in ref.iterrows():
        got = table.loc[task]
        assert (got["attempts"], got["passed"], got["total_tokens"]) == (
            row["attempts"], row["passed"], row["tokens"])
        assert got["cost_usd"] == pytest.approx(row["cost"])
        assert got["median_time_to_pass_sec"] == pytest.approx(row["ttp"], nan_ok=True)
    assert table.loc["(all)", "attempts"] == 20
