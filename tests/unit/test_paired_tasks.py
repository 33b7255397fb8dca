"""Task-level pairing (every attempt), the clustered McNemar and the MDE of `report paired`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2, ttest_rel
from scipy.stats import wilcoxon as scipy_wilcoxon
from statsmodels.stats.contingency_tables import mcnemar

import pytest_agentbench.reporting.paired_tasks as pt
import pytest_agentbench.reporting.stats as stats
from pytest_agentbench.reporting.load import load_runs
from pytest_agentbench.reporting.paired import compare
from tests.support.synthetic import make_record, write_run

# task: (A outcomes by attempt, B outcomes by attempt); B has one more attempt of t2 than A
FIXTURE = {
    "t1": ([1, 1, 0], [1, 0, 0]),
    "t2": ([0, 0], [1, 1, 0]),
    "t3": ([1], [1]),
    "t4": ([0, 1], [1, 1]),
}


def _write(root: Path, name: str, side: int, fixture: dict[str, tuple[list[int], list[int]]]
           ) -> Path:
    records = []
    for task, outcomes in fixture.items():
        runs = outcomes[side]
        for i, ok in enumerate(runs):
            records.append(make_record(f"run-{name}", task, "custom-dev", name, i, len(runs),
                                       bool(ok), None if ok else "TESTS_FAILED", 3, 10.0))
    return write_run(root / name, records, variant=name, run_id=f"run-{name}")


def fixture_report(tmp_path: Path, fixture: dict[str, tuple[list[int], list[int]]] = FIXTURE,
                   **kw: object) -> dict[str, object]:
    ra, rb = load_runs([_write(tmp_path, "a", 0, fixture), _write(tmp_path, "b", 1, fixture)])
    return compare(ra, rb, missing="skip", resamples=2000, **kw).data  # type: ignore[arg-type]


def test_task_level_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 3 tasks differ: below the minimum the large-sample tests are hidden (see the next test);
    # lowered here to check their numbers by hand
    monkeypatch.setattr(stats, "ASYMPTOTIC_MIN_TASKS", 1)
    d = fixture_report(tmp_path)
    # the attempt-level numbers are those of the index pairs, as before: t2's third B attempt
    # has no partner; a_only = t1#1, b_only = t2#0, t2#1, t4#0
    assert d["pairs"] == 8 and d["table"] == {"both_pass": 3, "a_only": 1, "b_only": 3,
                                             "both_fail": 1}
    tl = d["task_level"]
    assert isinstance(tl, dict)
    assert tl["tasks"] == 4 and (tl["attempts_a"], tl["attempts_b"]) == (8, 9)
    per = tl["per_task"]
    assert per["task_id"] == ["t1", "t2", "t3", "t4"]
    assert per["passed_b"] == [1, 2, 1, 2] and per["attempts_b"] == [3, 3, 1, 2]
    assert per["rate_a"] == pytest.approx([2 / 3, 0, 1, 1 / 2], abs=1e-15)
    # d_t = B - A per task: -1/3, 2/3 (every B attempt of t2), 0, 1/2 -> mean 5/24
    assert tl["mean_difference"] == pytest.approx(5 / 24, abs=1e-12)
    rate_a = np.array([2 / 3, 0, 1, 1 / 2])
    rate_b = np.array([1 / 3, 2 / 3, 1, 1])
    ref = ttest_rel(rate_b, rate_a)
    assert tl["t_test"]["statistic"] == pytest.approx(ref.statistic, abs=1e-9)
    assert tl["t_test"]["pvalue"] == pytest.approx(ref.pvalue, abs=1e-9)
    assert tl["t_test"]["df"] == 3
    w = scipy_wilcoxon(rate_b - rate_a)
    assert tl["wilcoxon"]["pvalue"] == pytest.approx(w.pvalue, abs=1e-9)
    assert tl["wilcoxon"]["nonzero"] == 3
    # Durkalski: u_k = (b_k - c_k)/n_k over the index pairs = 1/3, -2/2, 0/1, -1/2;
    # X2 = (sum u)^2 / sum u^2 = (49/36) / (49/36) = 1
    cm = tl["clustered_mcnemar"]
    assert cm["statistic"] == pytest.approx(1.0, abs=1e-12)
    assert cm["pvalue"] == pytest.approx(chi2.sf(1.0, 1), abs=1e-12)
    boot = tl["bootstrap"]
    assert boot["ci_low"] <= 5 / 24 <= boot["ci_high"] and boot["resampled"] == "tasks"
    assert "4 tasks" in tl["summary_line"] and "+20.8 pts" in tl["summary_line"]
    assert f"Durkalski 2003) p = {chi2.sf(1.0, 1):.4g}" in tl["summary_line"]


def test_small_samples_hide_large_sample_tests_and_say_why(tmp_path: Path) -> None:
    """Issue 26: 3 tasks, one discordant pair: exact McNemar p = 1, and below it a clustered
    McNemar p = 0.3173 and a paired t p = 0.42 with no warning. Now not shown, with the reason."""
    fixture = {"t1": ([1], [1]), "t2": ([1], [1]), "t3": ([0], [1])}
    d = fixture_report(tmp_path, fixture)
    assert d["mcnemar"]["exact"] and d["mcnemar"]["pvalue"] == 1.0
    tl = d["task_level"]
    assert isinstance(tl, dict) and tl["nonzero_tasks"] == 1
    for key in ("t_test", "wilcoxon", "clustered_mcnemar"):
        assert tl[key]["pvalue"] is None and tl[key]["statistic"] is None, key
        assert "needs at least 25 tasks with a non-zero difference, here 1" in tl[key]["not_shown"]
    line = tl["summary_line"]
    assert "0.3173" not in line and "0.4226" not in line and "not shown" in line
    # the task bootstrap's [+0, +100] is widened to the exact interval, which holds 0 widely
    boot = tl["bootstrap"]
    assert boot["ci_low"] < -0.5 and boot["ci_high"] == 1.0 and "exact" in boot["interval"]


def test_task_level_is_reproducible_and_seeded(tmp_path: Path) -> None:
    one = fixture_report(tmp_path / "1", seed=5)["task_level"]
    two = fixture_report(tmp_path / "2", seed=5)["task_level"]
    assert one == two


def test_durkalski_reduces_to_mcnemar_with_one_pair_per_task() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.random(200) < 0.5, rng.random(200) < 0.6
    a_only, b_only = (a & ~b).astype(float), (~a & b).astype(float)
    res = pt.durkalski(a_only, b_only, np.ones(200))
    ref = mcnemar([[0, a_only.sum()], [b_only.sum(), 0]], exact=False, correction=False)
    assert res["statistic"] == pytest.approx(ref.statistic, abs=1e-9)
    assert res["pvalue"] == pytest.approx(ref.pvalue, abs=1e-9)


def test_durkalski_against_the_formula_on_unequal_clusters() -> None:
    b = np.array([2.0, 0, 1, 3, 0])
    c = np.array([0.0, 1, 1, 0, 2])
    n = np.array([4.0, 2, 3, 5, 2])
    u = (b - c) / n  # .5, -.5, 0, .6, -1
    expected = u.sum() ** 2 / (u**2).sum()  # (-.4)^2 / 1.86
    assert expected == pytest.approx(0.16 / 1.86, abs=1e-15)
    assert pt.durkalski(b, c, n)["statistic"] == pytest.approx(expected, abs=1e-12)
    assert pt.durkalski(np.zeros(3), np.zeros(3), np.ones(3))["pvalue"] == 1.0


def test_paired_t_matches_scipy_and_degenerate_cases() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.random(57), rng.random(57)
    got = pt.paired_t(y - x)
    ref = ttest_rel(y, x)
    assert got["statistic"] == pytest.approx(ref.statistic, abs=1e-9)
    assert got["pvalue"] == pytest.approx(ref.pvalue, abs=1e-9)
    assert pt.paired_t(np.zeros(5))["pvalue"] is None  # no variation: undefined, as scipy's nan
    assert pt.paired_t(np.array([0.5]))["statistic"] is None
    assert pt.wilcoxon(np.zeros(4))["pvalue"] is None


def test_cluster_bootstrap_matches_plain_resampling_in_distribution() -> None:
    values = np.repeat([-1.0, -0.5, 0.0, 1 / 3, 1.0], [30, 10, 100, 20, 40])
    dist = pt.cluster_bootstrap_mean(values, 20_000, seed=1)
    assert dist.mean() == pytest.approx(values.mean(), abs=2e-3)
    # a bootstrap mean's sd is the population sd / sqrt(T)
    assert dist.std() == pytest.approx(values.std() / np.sqrt(len(values)), rel=0.03)
    assert np.isnan(pt.cluster_bootstrap_mean(np.array([]), 3, 0)).all()


def test_power_section_of_report_paired(tmp_path: Path) -> None:
    d = fixture_report(tmp_path)
    p = d["power"]
    assert isinstance(p, dict)
    assert p["pairs"] == 8 and p["discordance"] == pytest.approx(4 / 8)
    assert p["attempts_per_task"] == 2.0 and p["design_effect"] >= 1.0
    assert p["alpha"] == 0.05 and p["power"] == 0.8
    assert p["mde"] is None or p["mde"] > 0.5  # 8 pairs detect only huge differences
    assert p["summary_line"].startswith("Minimum detectable effect")


def test_task_level_counts_infra_only_when_asked(tmp_path: Path) -> None:
    records_a = [make_record("run-a", "t1", "custom-dev", "a", i, 2, True, None, 3, 10.0)
                 for i in range(2)]
    records_b = [make_record("run-b", "t1", "custom-dev", "b", 0, 2, True, None, 3, 10.0),
                 make_record("run-b", "t1", "custom-dev", "b", 1, 2, False, "LLM_ERROR", 3, 10.0)]
    ra, rb = load_runs([write_run(tmp_path / "a", records_a, variant="a", run_id="run-a"),
                        write_run(tmp_path / "b", records_b, variant="b", run_id="run-b")])
    dropped = compare(ra, rb, resamples=10).data["task_level"]
    assert dropped["per_task"]["attempts_b"] == [1] and dropped["mean_difference"] == 0.0
    counted = compare(ra, rb, resamples=10, infra_as_failure=True).data["task_level"]
    assert counted["per_task"]["attempts_b"] == [2] and counted["mean_difference"] == -0.5


def test_distinct_per_task_equals_drop_duplicates() -> None:
    from pytest_agentbench.reporting.paired import _distinct_per_task, _sorted_by_task_attempt

    frame = pd.DataFrame({"task_id": ["b", "a", "b", "a", "c"], "image": ["x", "y", "x", "y", None],
                          "limit": [1.0, 2.0, 1.0, 2.0, np.nan]})
    cols = ["task_id", "image", "limit"]
    assert _distinct_per_task(frame, cols).equals(frame[cols].drop_duplicates())
    frame.loc[2, "image"] = "z"  # task b differs between its attempts: the slow path
    assert _distinct_per_task(frame, cols).equals(frame[cols].drop_duplicates())
    one = frame.iloc[[0, 1, 4]]
    assert _distinct_per_task(one, cols).equals(one[cols])
    ordered = pd.DataFrame({"task_id": ["a", "a", "b"], "attempt_index": [0, 1, 0]})
    assert _sorted_by_task_attempt(ordered)
    assert not _sorted_by_task_attempt(ordered.iloc[[1, 0, 2]])
    assert not _sorted_by_task_attempt(ordered.iloc[[2, 0, 1]])
