"""The cost vs pass-rate frontier of `report compare` (compare.py), in the table, CSV and
markdown: hand-made points, then four synthetic runs whose costs come from their step counts."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from pytest_agentbench.reporting.compare import compare_runs, pareto_frontier
from pytest_agentbench.reporting.compare_render import render_compare
from pytest_agentbench.reporting.load import load_runs
from tests.support.synthetic import make_record, write_run


def test_pareto_frontier_by_hand() -> None:
    # (cost, rate): a cheap/low, b mid, c dominated by b, d best/expensive, e ties b exactly
    cost = [1.0, 2.0, 3.0, 5.0, 2.0]
    rate = [0.5, 0.8, 0.7, 0.9, 0.8]
    assert pareto_frontier(cost, rate) == [True, True, False, True, True]
    assert pareto_frontier([1.0, 1.0], [0.5, 0.6]) == [False, True]  # same cost, better rate
    assert pareto_frontier([math.nan, 2.0], [0.9, 0.1]) == [False, True]  # unknown cost
    assert pareto_frontier([], []) == []


def _run(tmp: Path, name: str, steps: int, passes: int, n: int = 10) -> Path:
    recs = [make_record(f"run-{name}", f"t{i:02d}", "s", name, 0, 1, i < passes,
                        None if i < passes else "TESTS_FAILED", steps=steps, duration=5.0)
            for i in range(n)]
    return write_run(tmp / name, recs, variant=name, run_id=f"run-{name}")


def test_compare_marks_the_frontier(tmp_path: Path) -> None:
    runs = load_runs([_run(tmp_path, "cheap", 1, 5), _run(tmp_path, "mid", 3, 8),
                      _run(tmp_path, "wasteful", 6, 6), _run(tmp_path, "best", 8, 10)],
                     fields="all")
    report = compare_runs(runs, resamples=200)
    on = {r["run"]: r["frontier"] for r in report.data["runs"]}
    assert on == {"cheap": True, "mid": True, "wasteful": False, "best": True}
    mid = next(r for r in report.data["runs"] if r["run"] == "mid")
    assert mid["cost_per_pass_usd"] == mid["cost_usd"] / 8
    t = report.table
    assert not t.loc[t["scope_type"] != "overall", "frontier"].any()  # only overall rows
    rows = list(csv.DictReader(io.StringIO(render_compare(report, "csv"))))
    flags = {r["run"]: r["frontier"] for r in rows if r["scope_type"] == "overall"}
    assert flags == {"cheap": "True", "mid": "True", "wasteful": "False", "best": "True"}
    md = render_compare(report, "md")
    assert "Cost frontier (pass rate vs cost per scored attempt" in md
    assert "cheap, mid, best." in md
