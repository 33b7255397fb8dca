"""Loading, summary, paired comparison, gate, renderings and CLI over small run directories."""

from __future__ import annotations

import copy
import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

import pytest_agentbench.reporting.cli as cli
import pytest_agentbench.reporting.html.run_page as html
import pytest_agentbench.reporting.render as render
from pytest_agentbench.reporting.gate import gate
from pytest_agentbench.reporting.load import ReportError, load_run, load_runs
from pytest_agentbench.reporting.paired import PairingError, compare
from pytest_agentbench.reporting.scope_table import SCOPE_COLUMNS
from pytest_agentbench.reporting.summary import summarize, write_summary
from pytest_agentbench.schemas.records import AttemptRecord
from tests.support.synthetic import make_record, synthetic_records, write_run


def rec(task: str, passed: bool = True, reason: str | None = None, attempt: int = 0,
        attempts: int = 1, suite: str = "custom-dev", **changes: Any) -> dict[str, Any]:
    """A valid record; `changes` keys are dotted paths, e.g. result__summary -> result.summary."""
    if not passed and reason is None:
        reason = "TESTS_FAILED"
    r = copy.deepcopy(make_record("run-x", task, suite, "v", attempt, attempts, passed, reason,
                                  steps=3 + attempt, duration=10.0 + attempt))
    for key, value in changes.items():
        *parents, leaf = key.split("__")
        node = r
        for p in parents:
            node = node[p]
        node[leaf] = value
    return r


def run_dir(tmp_path: Path, name: str, records: list[dict[str, Any]]) -> Path:
    for r in records:
        AttemptRecord.model_validate(r)  # every test record is a valid AttemptRecord
    return write_run(tmp_path / name, records, variant=name, run_id=f"run-{name}")


def oracle_and_nop(tmp_path: Path, n: int = 12) -> tuple[Path, Path]:
    oracle = run_dir(tmp_path, "oracle", [rec(f"t{i:02d}") for i in range(n)])
    nop = run_dir(tmp_path, "nop", [rec(f"t{i:02d}", passed=False) for i in range(n)])
    return oracle, nop


# --- loading --------------------------------------------------------------------------------

def test_synthetic_generator_writes_valid_records(tmp_path: Path) -> None:
    records = list(synthetic_records(400, attempts=2, seed=3))
    for r in records:
        AttemptRecord.model_validate(r)
    path = write_run(tmp_path / "s", records)
    run = load_run(path, validate=True)
    assert len(run.attempts) == 400 and run.attempts["task_id"].nunique() == 200


def test_load_tolerates_truncated_last_line_and_duplicates(tmp_path: Path) -> None:
    path = run_dir(tmp_path, "a", [rec("t1"), rec("t2", passed=False), rec("t1", passed=False)])
    with (path / "attempts.jsonl").open("a") as fh:
        fh.write('{"run_id": "run-x", "task_id": "t3", "resu')
    run = load_run(path)
    assert sorted(run.attempts["task_id"]) == ["t1", "t2"]
    assert not run.attempts.set_index("task_id").loc["t1", "passed"]  # the last one wins
    assert any("truncated" in w for w in run.warnings)
    assert any("duplicate" in w for w in run.warnings)


def test_load_names_the_bad_record(tmp_path: Path) -> None:
    path = run_dir(tmp_path, "a", [rec("t1"), rec("t2")])
    lines = (path / "attempts.jsonl").read_text().splitlines()
    bad = json.loads(lines[1])
    del bad["result"]
    (path / "attempts.jsonl").write_text(lines[0] + "\n" + json.dumps(bad) + "\n" + lines[0] + "\n")
    with pytest.raises(ReportError, match="record 2: result"):
        load_run(path)
    (path / "attempts.jsonl").write_text(lines[0] + "\n{not json\n" + lines[1] + "\n")
    with pytest.raises(ReportError, match="record 2"):
        load_run(path)
    with pytest.raises(ReportError, match="not a run directory"):
        load_run(tmp_path / "nope")


def test_load_rejects_unknown_reason(tmp_path: Path) -> None:
    r = rec("t1", passed=False)
    r["result"]["failure_reason"] = "MADE_UP"
    path = write_run(tmp_path / "a", [r])
    with pytest.raises(ReportError, match="MADE_UP"):
        load_run(path)


# --- summary --------------------------------------------------------------------------------

def mixed_run(tmp_path: Path) -> Path:
    records = [
        rec("a1"), rec("a2"),
        rec("a3", passed=False, result__summary="assert 1 == 2", result__signature=[]),
        rec("a4", passed=False, result__summary="assert 3 == 4", result__signature=[]),
        rec("b1", suite="custom-heldout"),
        rec("b2", suite="custom-heldout", passed=False, reason="TIMEOUT"),
        rec("x1", passed=False, reason="BASELINE_NOT_FAILING"),
        rec("x2", passed=False, reason="SETUP_FAILED"),
        rec("f1", passed=False, reason="BASELINE_FLAKY", baseline_validation__is_flaky=True),
        rec("f2", baseline_validation__is_flaky=True),  # passed, but its baseline is flaky
        rec("q1", passed=False, quarantined="known flaky"),
        rec("i1", passed=False, reason="SANDBOX_ERROR"),
        rec("i2", passed=False, reason="LLM_ERROR"),
    ]
    return run_dir(tmp_path, "mixed", records)


def test_summary_keeps_categories_apart(tmp_path: Path) -> None:
    s = summarize(load_run(mixed_run(tmp_path))).data
    c = s["counts"]
    assert (c["attempts"], c["scored"], c["passed"], c["failed"]) == (13, 6, 3, 3)
    assert c["invalid_by_reason"] == {"BASELINE_NOT_FAILING": 1, "SETUP_FAILED": 1}
    assert (c["flaky"], c["quarantined"], c["infra_errors"]) == (2, 1, 2)
    assert c["infra_by_reason"] == {"LLM_ERROR": 1, "SANDBOX_ERROR": 1}
    pr = s["pass_rate"]
    assert (pr["passed"], pr["scored"]) == (3, 6)
    assert (pr["ci_low"], pr["ci_high"]) == pytest.approx(
        proportion_confint(3, 6, method="wilson"), abs=1e-12)
    suites = {r["suite"]: r for r in s["suites"]}
    assert (suites["custom-heldout"]["passed"], suites["custom-heldout"]["scored"]) == (1, 2)
    assert suites["custom-heldout"]["ci_low"] == pytest.approx(
        proportion_confint(1, 2, method="wilson")[0], abs=1e-12)
    assert s["rules"]["infra_errors"] == "excluded"
    counted = summarize(load_run(tmp_path / "mixed"), infra_as_failure=True).data
    assert (counted["pass_rate"]["passed"], counted["pass_rate"]["scored"]) == (3, 8)


def test_summary_distributions_costs_taxonomy_signatures(tmp_path: Path) -> None:
    s = summarize(load_run(mixed_run(tmp_path))).data
    ttp = s["time_to_pass_sec"]
    assert ttp["count"] == 3 and ttp["median"] == 10.0 and ttp["max"] == 10.0
    assert s["steps_to_pass"]["median"] == 3.0
    u = s["usage"]
    assert u["total_tokens"] == 13 * 3 * 1050
    assert u["cost_per_pass_usd"] == pytest.approx(u["scored_cost_usd"] / 3)
    by_reason = {r["reason"]: r for r in s["taxonomy"]["by_reason"]}
    assert by_reason["TESTS_FAILED"]["count"] == 3 and by_reason["LLM_ERROR"]["blame"] == "infra"
    by_task = {r["task_id"]: r["reasons"] for r in s["taxonomy"]["by_task"]}
    assert by_task["x2"] == {"SETUP_FAILED": 1}
    assert [t["task_id"] for t in s["hardest_tasks"][:3]] == ["a3", "a4", "b2"]
    top = s["failure_signatures"][0]  # "assert 1 == 2" and "assert 3 == 4" cluster together
    assert top["count"] == 2 and top["examples"] == ["a3", "a4"]
    assert s["pass_at_k"] == []


def test_pass_at_k_with_several_attempts(tmp_path: Path) -> None:
    records = [rec("t1", attempt=i, attempts=3, passed=i == 2) for i in range(3)]
    records += [rec("t2", attempt=i, attempts=3, passed=False) for i in range(3)]
    records += [rec("t3", attempt=i, attempts=3) for i in range(3)]
    s = summarize(load_run(run_dir(tmp_path, "k", records))).data
    values = {r["k"]: r["value"] for r in s["pass_at_k"]}
    assert values[1] == pytest.approx((1 / 3 + 0 + 1) / 3)
    assert values[2] == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert values[3] == pytest.approx(2 / 3)  # k = n: any pass


def test_csv_schema_is_stable(tmp_path: Path) -> None:
    expected = [
        "run_id", "variant", "scope_type", "scope", "suite", "attempts", "scored", "passed",
        "pass_rate", "ci_low", "ci_high", "invalid", "flaky", "quarantined", "infra_errors",
        "median_time_to_pass_sec", "median_steps_to_pass", "total_tokens", "cost_usd",
        "cost_per_pass_usd",
    ]
    assert expected == SCOPE_COLUMNS
    text = render.render_summary(summarize(load_run(mixed_run(tmp_path))), "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == expected
    assert [r["scope_type"] for r in rows[:3]] == ["overall", "suite", "suite"]
    overall = rows[0]
    assert (overall["scope"], overall["scored"], overall["passed"]) == ("(all)", "6", "3")
    assert float(overall["ci_low"]) == pytest.approx(proportion_confint(3, 6, method="wilson")[0])
    x1 = next(r for r in rows if r["scope"] == "x1")
    assert x1["pass_rate"] == "" and x1["invalid"] == "1"


def test_json_and_markdown_summary(tmp_path: Path) -> None:
    summary = summarize(load_run(mixed_run(tmp_path)))
    doc = json.loads(render.render_summary(summary, "json"))
    assert doc["schema"] == "agentbench.summary" and doc["schema_version"] == 1
    md = render.render_summary(summary, "md")
    assert "Wilson 95% CI" in md and "## Hardest tasks" in md and "SETUP_FAILED: 1" in md
    path = write_summary(tmp_path / "mixed")
    assert path.name == "report_summary.md" and "# Run summary" in path.read_text()


def test_markdown_escapes_untrusted_text(tmp_path: Path) -> None:
    path = run_dir(tmp_path, "evil", [
        rec("t|1", passed=False, result__summary="<script>alert(1)</script> | x\n# heading",
            result__signature=[])])
    md = render.render_summary(summarize(load_run(path)), "md")
    assert "<script>" not in md and "&lt;script&gt;" in md and "t\\|1" in md


def test_empty_run_summary(tmp_path: Path) -> None:
    path = write_run(tmp_path / "empty", [])
    summary = summarize(load_run(path))
    assert summary.data["pass_rate"]["rate"] is None
    for fmt in ("md", "csv", "json"):
        render.render_summary(summary, fmt)


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


# --- CLI ------------------------------------------------------------------------------------

def test_cli_exit_codes_and_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    oracle, nop = oracle_and_nop(tmp_path)
    assert cli.main(["report", "summary", "--run", str(oracle)]) == 0
    assert "# Run summary" in capsys.readouterr().out
    assert cli.main(["report", "summary", "--run", str(tmp_path / "missing")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    assert cli.main(["report", "paired", "--run-a", str(oracle), "--run-b", str(nop),
                     "--format", "json", "--seed", "7", "--resamples", "500"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "agentbench.paired" and doc["bootstrap"]["seed"] == 7
    assert cli.main(["gate", "--baseline", str(oracle), "--candidate", str(nop)]) == 1
    assert "REGRESSION" in capsys.readouterr().out
    assert cli.main(["gate", "--baseline", str(oracle), "--candidate", str(oracle),
                     "--format", "csv", "--inconclusive-ok"]) == 0
    row = next(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert row["regression"] == "False" and row["exit_code"] == "0"
    other = run_dir(tmp_path, "other", [rec("zz")])
    assert cli.main(["gate", "--baseline", str(oracle), "--candidate", str(other)]) == 2
    assert "refusing to pair" in capsys.readouterr().err
    out = tmp_path / "r.html"
    assert cli.main(["report", "summary", "--run", str(oracle), "--format", "html",
                     "--output", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_add_report_commands_on_a_foreign_parser() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="agentbench")
    cli.add_report_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["gate", "--baseline", "a", "--candidate", "b", "--margin", "0.1",
                              "--allow-mismatch", "image", "--allow-mismatch", "limits"])
    assert args.func is not None and args.allow_mismatch == ["image", "limits"]
    with pytest.raises(SystemExit):
        parser.parse_args(["report", "paired", "--run-a", "a", "--run-b", "b",
                           "--allow-mismatch", "tasks"])


def test_load_profiles_parse_what_they_need(tmp_path: Path) -> None:
    a, _ = oracle_and_nop(tmp_path)
    every = load_run(a).attempts
    summary = load_run(a, fields="summary").attempts
    pairing = load_runs([a])[0].attempts
    assert summary["total_tokens"].equals(every["total_tokens"])
    assert (summary["task_commit"] == "").all() and (every["task_commit"] != "").all()
    assert pairing["image"].equals(every["image"]) and (pairing["total_tokens"] == 0).all()
    with pytest.raises(ValueError):
        load_run(a, fields="nope")  # type: ignore[arg-type]


# --- HTML (structure; the browser test is in tests/e2e) -------------------------------------

def test_html_is_self_contained_and_escaped(tmp_path: Path) -> None:
    evil = rec("t1", passed=False, result__summary="</script><script>alert(1)</script>",
               artifact_paths={"task_dir": "../../../etc"})
    path = run_dir(tmp_path, "h", [evil, rec("t2")])
    page = html.render_html(load_run(path), summarize(load_run(path)))
    assert "<script>alert(1)" not in page and "\\u003c/script\\u003e" in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page
    data = json.loads(page.split('id="ab-data">')[1].split("</script>")[0])
    first = data["tasks"][0]["attempts"][0]
    assert first["missing"] and first["diffs"] == [] and first["tool_calls"] == []
