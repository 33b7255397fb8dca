"""The paired comparison of two runs (tests, pairing, exclusions) and the gate over it, on
small run directories (tests/support/report_runs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from statsmodels.stats.contingency_tables import mcnemar

import pytest_agentbench.reporting.render as render
from pytest_agentbench.reporting.gate import gate
from pytest_agentbench.reporting.load import load_run
from pytest_agentbench.reporting.paired import PairingError, compare
from tests.support.report_runs import oracle_and_nop, rec, run_dir

# --- paired ---------------------------------------------------------------------------------

def test_paired_oracle_vs_nop(tmp_path: Path) -> None:
    oracle, nop = oracle_and_nop(tmp_path)
    report = compare(load_run(oracle), load_run(nop), seed=5)
    d = report.data
    assert d["table"] == {"both_pass": 0, "a_only": 12, "b_only": 0, "both_fail": 0}
    ref = mcnemar([[0, 12], [0, 0]], exact=True, correction=True).pvalue
    assert d["mcnemar"]["pvalue"] == pytest.approx(ref, abs=1e-12)
    assert d["mcnemar"]["exact"] and d["difference"] == -1.0
    # every resample shows -100 points: the percentile interval [-1, -1] is tighter than the
    # exact one, to which it is widened (Clopper-Pearson at 0.0125 on 12 of 12 and 0 of 12)
    assert d["bootstrap"]["ci_low"] == -1.0
    assert d["bootstrap"]["ci_high"] == pytest.approx(1 - 2 * 0.0125 ** (1 / 12), abs=1e-9)
    assert d["significant"] and d["bootstrap"]["seed"] == 5
    md = render.render_paired(report, "md")
    assert "exact binomial" in md and "p = 0.000488281" in md


def test_paired_chi_square_and_reproducible_bootstrap(tmp_path: Path) -> None:
    a = [rec(f"t{i:03d}", passed=i % 3 != 0) for i in range(90)]
    b = [rec(f"t{i:03d}", passed=i % 2 == 0) for i in range(90)]
    ra, rb = load_run(run_dir(tmp_path, "a", a)), load_run(run_dir(tmp_path, "b", b))
    d1 = compare(ra, rb, method="bootstrap", seed=11, resamples=3000).data
    d2 = compare(ra, rb, method="bootstrap", seed=11, resamples=3000).data
    assert d1 == d2
    t = d1["table"]
    assert t["a_only"] + t["b_only"] >= 25 and not d1["mcnemar"]["exact"]
    ref = mcnemar([[t["both_pass"], t["a_only"]], [t["b_only"], t["both_fail"]]],
                  exact=False, correction=True)
    assert d1["mcnemar"]["pvalue"] == pytest.approx(ref.pvalue, abs=1e-12)
    assert d1["bootstrap"]["ci_low"] <= d1["difference"] <= d1["bootstrap"]["ci_high"]


def test_paired_no_discordant_pairs_all_pass_all_fail(tmp_path: Path) -> None:
    for name, passed in (("pass", True), ("fail", False)):
        a = run_dir(tmp_path, f"{name}-a", [rec(f"t{i}", passed=passed) for i in range(5)])
        b = run_dir(tmp_path, f"{name}-b", [rec(f"t{i}", passed=passed) for i in range(5)])
        d = compare(load_run(a), load_run(b)).data
        assert d["mcnemar"]["pvalue"] == 1.0 and d["difference"] == 0.0
        assert not d["significant"]
        key = "both_pass" if passed else "both_fail"
        assert d["table"][key] == 5


@pytest.mark.parametrize(("field", "change"), [
    ("task_commit", {"task_commit": "0" * 40}),
    ("image", {"image__digest": "runner@sha256:" + "ee" * 32}),
    ("limits", {"limits__timeout_sec": 60.0}),
    ("harness_version", {"harness_version": "9.9.9"}),
])
def test_pairing_refuses_mismatch_unless_allowed(
    tmp_path: Path, field: str, change: dict[str, Any]
) -> None:
    a = run_dir(tmp_path, "a", [rec("t1"), rec("t2")])
    b = run_dir(tmp_path, "b", [rec("t1", **change), rec("t2", passed=False, **change)])
    with pytest.raises(PairingError) as err:
        compare(load_run(a), load_run(b))
    assert field in str(err.value) and any(p.startswith(field) for p in err.value.problems)
    d = compare(load_run(a), load_run(b), allow_mismatch=[field]).data
    assert field in d["pairing"]["allowed_mismatches"] and d["pairs"] == 2


def test_pairing_lists_every_problem_and_missing_tasks(tmp_path: Path) -> None:
    a = run_dir(tmp_path, "a", [rec("t1"), rec("t2"), rec("t3")])
    b = run_dir(tmp_path, "b", [rec("t1", task_commit="1" * 40), rec("t2"), rec("t4")])
    with pytest.raises(PairingError) as err:
        compare(load_run(a), load_run(b))
    text = str(err.value)
    assert "only in A: t3" in text and "only in B: t4" in text and "task_commit" in text
    d = compare(load_run(a), load_run(b), missing="skip", allow_mismatch=["task_commit"]).data
    assert d["pairing"]["only_in_a"] == ["t3"] and d["pairs"] == 2


def test_pairing_missing_attempts(tmp_path: Path) -> None:
    a = run_dir(tmp_path, "a", [rec("t1", attempt=i, attempts=2) for i in range(2)])
    b = run_dir(tmp_path, "b", [rec("t1", attempt=0, attempts=2)])
    with pytest.raises(PairingError, match="t1#1"):
        compare(load_run(a), load_run(b))
    d = compare(load_run(a), load_run(b), missing="skip").data
    assert d["pairs"] == 1 and d["pairing"]["unpaired_attempts"] == 1


def test_paired_exclusion_rule(tmp_path: Path) -> None:
    a = run_dir(tmp_path, "a", [rec("ok1"), rec("ok2"), rec("inv"), rec("flk"),
                                rec("qua"), rec("inf")])
    b = run_dir(tmp_path, "b", [
        rec("ok1", passed=False), rec("ok2"),
        rec("inv", passed=False, reason="BASELINE_NOT_FAILING"),
        rec("flk", baseline_validation__is_flaky=True),
        rec("qua", quarantined="flaky upstream"), rec("inf", passed=False, reason="LLM_ERROR"),
    ])
    d = compare(load_run(a), load_run(b)).data
    ex = d["exclusions"]
    assert (ex["invalid_or_flaky_tasks"], ex["quarantined_pairs"], ex["infra_pairs"]) == (2, 1, 1)
    assert d["pairs"] == 2 and d["table"]["a_only"] == 1
    counted = compare(load_run(a), load_run(b), infra_as_failure=True).data
    assert counted["pairs"] == 3 and counted["table"]["a_only"] == 2


# --- gate -----------------------------------------------------------------------------------

def test_gate_exit_codes(tmp_path: Path) -> None:
    oracle, nop = oracle_and_nop(tmp_path)
    ra, rn = load_run(oracle), load_run(nop)
    bad = gate(ra, rn)
    assert bad.regression and bad.exit_code == 1 and bad.data["observed_drop"] == 1.0
    assert bad.data["verdict"].startswith("REGRESSION")
    good = gate(ra, ra)  # 12 tasks cannot show a 5-point drop: inconclusive, exit 3
    assert not good.regression and good.exit_code == 3 and good.outcome == "inconclusive"
    assert gate(ra, ra, inconclusive_ok=True).exit_code == 0
    # no pair disagrees: the exact one-sided bound over the tasks (Clopper-Pearson at alpha / 2,
    # the Bonferroni share of p10), not the bootstrap's zero
    tasks = good.data["paired"]["tasks"]
    assert good.data["drop_upper_bound"] == pytest.approx(1 - 0.025 ** (1 / tasks), abs=1e-9)
    assert good.data["bound_method"].startswith("exact (Clopper-Pearson")
    assert gate(ra, ra, max_drop=0.6).exit_code == 0  # a 60-point drop is ruled out
    ni = gate(ra, ra, margin=0.05, max_drop=None, inconclusive_ok=True)
    assert ni.exit_code == 0 and ni.outcome == "inconclusive"
    assert gate(ra, rn, margin=0.05).exit_code == 1  # shown worse: the lower bound is 100 pts


def test_gate_max_drop_boundary_and_non_inferiority(tmp_path: Path) -> None:
    a = run_dir(tmp_path, "a", [rec(f"t{i:02d}") for i in range(20)])
    b = run_dir(tmp_path, "b", [rec(f"t{i:02d}", passed=i != 0) for i in range(20)])
    ra, rb = load_run(a), load_run(b)
    allowed = gate(ra, rb, max_drop=0.05)  # drop of exactly 5 points is allowed ...
    assert not allowed.regression and allowed.exit_code == 3  # ... but 20 tasks cannot tell
    assert gate(ra, rb, max_drop=0.04).exit_code == 1
    ni = gate(ra, rb, margin=0.05, alpha=0.05, seed=3)
    # not shown within the margin, not shown beyond it: inconclusive, not a regression
    assert ni.data["drop_upper_bound"] >= 0.05 and ni.data["drop_lower_bound"] <= 0.05
    assert ni.exit_code == 3 and "neither shown" in ni.data["verdict"]
    assert "non-inferiority margin" in ni.data["verdict"]


def test_gate_uses_the_data_not_only_the_sample_size(tmp_path: Path) -> None:
    """The review's cases: a candidate far better on 30 tasks is OK (the MDE alone called it
    inconclusive); equal rates on 10 tasks that disagree everywhere are inconclusive under a
    margin (the old rule called them a regression); 80 identical tasks rule out 5 points."""
    worse = run_dir(tmp_path, "worse", [rec(f"t{i:02d}", passed=False) for i in range(30)])
    better = run_dir(tmp_path, "better", [rec(f"t{i:02d}") for i in range(30)])
    rw, rb = load_run(worse), load_run(better)
    for kwargs in ({"max_drop": 0.05}, {"margin": 0.05}, {"max_drop": 0.0}):
        assert gate(rw, rb, **kwargs).outcome == "ok", kwargs
    assert gate(rb, rw, margin=0.05).outcome == "regression"
    a = run_dir(tmp_path, "a", [rec(f"s{i}", passed=i < 5) for i in range(10)])
    b = run_dir(tmp_path, "b", [rec(f"s{i}", passed=i >= 5) for i in range(10)])
    swapped = gate(load_run(a), load_run(b), margin=0.05)
    assert swapped.outcome == "inconclusive" and swapped.exit_code == 3
    same = run_dir(tmp_path, "same", [rec(f"u{i:02d}") for i in range(80)])
    rs = load_run(same)
    assert gate(rs, rs, max_drop=0.05).outcome == "ok"  # 1 - 0.025 ** (1 / 80) = 4.5 points
    assert gate(rs, rs, max_drop=0.0).outcome == "inconclusive"  # zero is never ruled out so


