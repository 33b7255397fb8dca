"""Loading, summary, renderings and CLI over small run directories (the run fixtures:
tests/support/report_runs.py). The paired comparison and the gate: test_reports_paired.py."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from statsmodels.stats.proportion import proportion_confint

import pytest_agentbench.reporting.cli as cli
import pytest_agentbench.reporting.html.run_page as html
import pytest_agentbench.reporting.render as render
from pytest_agentbench.reporting.load import ReportError, load_run, load_runs
from pytest_agentbench.reporting.scope_table import SCOPE_COLUMNS
from pytest_agentbench.reporting.summary import summarize, write_summary
from pytest_agentbench.schemas.records import AttemptRecord
from tests.support.report_runs import oracle_and_nop, rec, run_dir
from tests.support.synthetic import synthetic_records, write_run

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
