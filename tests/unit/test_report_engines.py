"""Engines and infrastructure retries in the reports (issue 12): the loader's columns, the
summary's figures (pass rate with and without retried attempts, the per-engine table), their
markdown and HTML sections, and pairing that counts a retried attempt once."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from statsmodels.stats.proportion import proportion_confint

import pytest_agentbench.reporting.html.run_page as html
import pytest_agentbench.reporting.render as render
from pytest_agentbench.reporting.gate import gate
from pytest_agentbench.reporting.load import load_run
from pytest_agentbench.reporting.paired import compare
from pytest_agentbench.reporting.summary import summarize, write_summary
from pytest_agentbench.schemas.records import AttemptRecord
from tests.support.synthetic import make_record, write_run


def rec(task: str, passed: bool = True, reason: str | None = None, engine: str | None = "default",
        duration: float = 10.0, lost_on: tuple[str, ...] = (), attempt: int = 0,
        sub_reason: str | None = None) -> dict[str, Any]:
    """A valid record whose last try ran on `engine`; one earlier try lost on each `lost_on`."""
    if not passed and reason is None:
        reason = "TESTS_FAILED"
    r = copy.deepcopy(make_record("run-e", task, "custom-dev", "v", attempt, 1, passed, reason,
                                  steps=3, duration=duration))
    r["result"]["sub_reason"] = sub_reason
    r["engine"] = engine
    r["retried"] = [{"engine": e, "failure_reason": "SANDBOX_ERROR", "sub_reason": "ENGINE_LOST",
                     "summary": f"engine {e} stopped answering", "duration_sec": 7.0 + i,
                     "artifacts_dir": f"tasks/{task}.try{i + 1}"}
                    for i, e in enumerate(lost_on)]
    return r


def old(record: dict[str, Any]) -> dict[str, Any]:
    """The same record as written before engines and retries were recorded."""
    r = copy.deepcopy(record)
    del r["engine"], r["retried"]
    del r["result"]["sub_reason"]
    return r


def run_dir(tmp_path: Path, name: str, records: list[dict[str, Any]]) -> Path:
    for r in records:
        AttemptRecord.model_validate(r)
    return write_run(tmp_path / name, records, variant="v", run_id="run-e")


def two_engine_records() -> list[dict[str, Any]]:
    """7 attempts: 6 scored, 5 passed; t6 passed on its second try (first lost on `second`), t7
    lost its engine twice (second, then default): infra, not scored."""
    return [
        rec("t1", duration=10.0), rec("t2", engine="second", duration=11.0),
        rec("t3", passed=False, duration=20.0), rec("t4", engine="second", duration=13.0),
        rec("t5", duration=30.0), rec("t6", duration=40.0, lost_on=("second",)),
        rec("t7", passed=False, reason="SANDBOX_ERROR", sub_reason="ENGINE_LOST", duration=50.0,
            lost_on=("second",)),
    ]


def wilson_text(passed: int, scored: int) -> str:
    low, high = proportion_confint(passed, scored, method="wilson")
    return f"[{low * 100:.1f}%, {high * 100:.1f}%]"


# --- loader ---------------------------------------------------------------------------------

@pytest.mark.parametrize("fields", ["summary", "all"])
def test_loader_exposes_engine_and_tries(tmp_path: Path, fields: Any) -> None:
    df = load_run(run_dir(tmp_path, "r", two_engine_records()), validate=True,
                  fields=fields).attempts.set_index("task_id")
    assert df.loc["t2", "engine"] == "second" and df.loc["t1", "engine"] == "default"
    assert df["infra_retries"].to_dict() == {"t1": 0, "t2": 0, "t3": 0, "t4": 0, "t5": 0,
                                             "t6": 1, "t7": 1}
    assert df.loc["t6", "retry_engines"] == ("second",) and df.loc["t1", "retry_engines"] == ()
    assert df.loc["t7", "retried"][0]["sub_reason"] == "ENGINE_LOST"
    assert df.loc["t7", "retried"][0]["artifacts_dir"] == "tasks/t7.try1"
    assert len(df) == 7  # a retried attempt is one row


@pytest.mark.parametrize("fields", ["summary", "pairing", "all"])
def test_old_records_load_as_before(tmp_path: Path, fields: Any) -> None:
    records = [old(r) for r in two_engine_records()]
    df = load_run(run_dir(tmp_path, "old", records), validate=True, fields=fields).attempts
    assert df["engine"].isna().all() and (df["infra_retries"] == 0).all()
    assert all(t == () for t in df["retry_engines"]) and all(t == () for t in df["retried"])


def test_local_sandbox_engine_none_and_empty_run(tmp_path: Path) -> None:
    df = load_run(run_dir(tmp_path, "l", [rec("t1", engine=None)])).attempts
    assert df["engine"].tolist() == [None] and df["infra_retries"].tolist() == [0]
    empty = summarize(load_run(write_run(tmp_path / "empty", []))).data
    assert empty["infra_retries"]["retried_attempts"] == 0
    assert empty["engines"] == {"names": [], "by_engine": []}
    assert "Infrastructure retries" not in render.render_summary(summarize(
        load_run(tmp_path / "empty")), "md")


# --- summary figures ------------------------------------------------------------------------

def test_pass_rate_with_and_without_retried_attempts(tmp_path: Path) -> None:
    s = summarize(load_run(run_dir(tmp_path, "r", two_engine_records()))).data
    r = s["infra_retries"]
    with_, without = r["pass_rate_with_retried"], r["pass_rate_without_retried"]
    assert (with_["passed"], with_["scored"]) == (5, 6)  # t6 once, by its last try (passed)
    assert with_ == s["pass_rate"]  # "with" is the main figure
    assert (without["passed"], without["scored"]) == (4, 5)  # t6 left out
    assert (without["ci_low"], without["ci_high"]) == pytest.approx(
        proportion_confint(4, 5, method="wilson"), abs=1e-12)
    assert (r["retried_attempts"], r["earlier_tries"], r["retried_scored"]) == (2, 2, 1)
    assert r["lost"] == [{"engine": "second", "reason": "ENGINE_LOST", "tries": 2}]
    assert r["last_try"] == {"passed": 1, "failed": 0, "infra_error": 1, "excluded": 0}
    assert s["counts"]["attempts"] == 7 and s["counts"]["infra_errors"] == 1


def test_infra_as_failure_counts_the_last_try(tmp_path: Path) -> None:
    s = summarize(load_run(run_dir(tmp_path, "r", two_engine_records())),
                  infra_as_failure=True).data["infra_retries"]
    assert (s["pass_rate_with_retried"]["passed"], s["pass_rate_with_retried"]["scored"]) == (5, 7)
    # t6 and t7 (retried) left out: t1..t5
    assert (s["pass_rate_without_retried"]["passed"],
            s["pass_rate_without_retried"]["scored"]) == (4, 5)
    assert s["last_try"]["infra_error"] == 1 and s["retried_scored"] == 2


def test_per_engine_rows(tmp_path: Path) -> None:
    rows = summarize(load_run(run_dir(tmp_path, "r", two_engine_records()))).data["engines"]
    assert rows["names"] == ["default", "second"]
    by = {e["engine"]: e for e in rows["by_engine"]}
    d, sec = by["default"], by["second"]
    assert (d["attempts"], d["scored"], d["passed"], d["infra_errors"], d["tries_lost"]) \
        == (5, 4, 3, 1, 0)
    assert d["median_duration_sec"] == 30.0  # 10, 20, 30, 40, 50
    assert (sec["attempts"], sec["scored"], sec["passed"], sec["infra_errors"],
            sec["tries_lost"]) == (2, 2, 2, 0, 2)
    assert sec["median_duration_sec"] == 12.0  # 11, 13


def test_engine_seen_only_in_lost_tries_makes_two_engines(tmp_path: Path) -> None:
    records = [rec("t1", lost_on=("second",)), rec("t2"), rec("t3", engine=None,
                                                               passed=False,
                                                               reason="TASK_INVALID")]
    s = summarize(load_run(run_dir(tmp_path, "r", records))).data
    assert s["engines"]["names"] == ["default", "second"]
    by = [(e["engine"], e["attempts"], e["tries_lost"]) for e in s["engines"]["by_engine"]]
    assert by == [("default", 2, 0), ("second", 0, 1), (None, 1, 0)]


# --- markdown and HTML ----------------------------------------------------------------------

def test_markdown_sections(tmp_path: Path) -> None:
    md = render.render_summary(summarize(load_run(run_dir(tmp_path, "r", two_engine_records()))),
                               "md")
    assert ("2 attempts were retried after an infrastructure error (2 earlier tries set aside: "
            "2 on engine second (ENGINE_LOST)). Each attempt counts once, by its last try: "
            "1 passed, 0 failed, 1 infra error, 0 excluded.") in md
    assert (f"Pass rate 83.3% {wilson_text(5, 6)} with retried attempts (5/6 scored); "
            f"80.0% {wilson_text(4, 5)} without them (4/5 scored; 1 retried attempt left "
            "out).") in md
    assert "| default | 5 | 4 | 3 | 75.0% | " in md and "| 1 | 0 | 30.0 |" in md
    assert "| second | 2 | 2 | 2 | 100.0% | " in md and "| 0 | 2 | 12.0 |" in md
    assert md.index("## Pass rate") < md.index("## Infrastructure retries") \
        < md.index("## Engines") < md.index("## Attempts by category")
    assert "## Engines" in write_summary(tmp_path / "r").read_text()  # the plugin's path


def test_nothing_new_for_one_engine_without_retries(tmp_path: Path) -> None:
    records = [rec("t1"), rec("t2", passed=False), rec("t3", engine="default")]
    new = render.render_summary(summarize(load_run(run_dir(tmp_path, "new", records))), "md")
    before = render.render_summary(summarize(load_run(run_dir(
        tmp_path, "before", [old(r) for r in records]))), "md")
    assert new.replace(str(tmp_path / "new"), str(tmp_path / "before")) == before
    assert "retr" not in new.lower() and "## Engines" not in new
    page = html.render_html(load_run(tmp_path / "new"), summarize(load_run(tmp_path / "new")))
    assert "Infrastructure retries" not in page and 'id="engines"' not in page


def test_two_engines_without_retries_show_only_the_table(tmp_path: Path) -> None:
    md = render.render_summary(summarize(load_run(run_dir(
        tmp_path, "r", [rec("t1"), rec("t2", engine="second")]))), "md")
    assert "## Engines" in md and "## Infrastructure retries" not in md


def test_html_sections_and_drill_down(tmp_path: Path) -> None:
    run = load_run(run_dir(tmp_path, "r", two_engine_records()))
    page = html.render_html(run, summarize(run))
    assert "<h2>Infrastructure retries</h2>" in page and 'id="engines"' in page
    assert "83.3%" in page and "80.0%" in page
    assert page.index("Infrastructure retries") < page.index("<h2>Summary</h2>")
    data = json.loads(page.split('id="ab-data">')[1].split("</script>")[0])
    t6 = next(t for t in data["tasks"] if t["task_id"] == "t6")["attempts"][0]
    assert t6["engine"] == "default"
    assert t6["retried"] == ("try 1: SANDBOX_ERROR/ENGINE_LOST on second (7.0 s, artifacts "
                             "tasks/t6.try1)")


def test_engine_names_are_escaped(tmp_path: Path) -> None:
    records = [rec("t1", engine="a|<b>"), rec("t2", lost_on=("<script>x",))]
    run = load_run(run_dir(tmp_path, "r", records))
    md = render.render_summary(summarize(run), "md")
    assert "<b>" not in md and "<script>" not in md and "a\\|&lt;b&gt;" in md
    page = html.render_html(run, summarize(run))
    assert "<script>x" not in page and "&lt;script&gt;x" in page


# --- pairing --------------------------------------------------------------------------------

def test_a_retried_attempt_pairs_as_one_attempt(tmp_path: Path) -> None:
    b_records = [rec(f"t{i}", passed=i % 2 == 0) for i in range(1, 8)]
    plain = [old(r) for r in two_engine_records()]
    b = load_run(run_dir(tmp_path, "b", b_records), fields="pairing")
    a_retried = load_run(run_dir(tmp_path, "ar", two_engine_records()), fields="pairing")
    a_plain = load_run(run_dir(tmp_path, "ap", plain), fields="pairing")
    retried, once = compare(a_retried, b, seed=3), compare(a_plain, b, seed=3)
    assert retried.data["pairs"] == once.data["pairs"] == 6  # t7 (infra) excluded; t6 once
    assert retried.data["table"] == once.data["table"]
    assert retried.pairs[["task_id", "attempt_index", "a_passed", "b_passed"]].equals(
        once.pairs[["task_id", "attempt_index", "a_passed", "b_passed"]])
    assert retried.data["exclusions"]["infra_pairs"] == 1
    g1, g2 = gate(a_retried, b, seed=3), gate(a_plain, b, seed=3)
    assert (g1.exit_code, g1.data["observed_drop"]) == (g2.exit_code, g2.data["observed_drop"])


def test_schema_documents_the_new_fields(tmp_path: Path) -> None:
    doc = (Path(html.__file__).parents[1] / "SCHEMA.md").read_text(encoding="utf-8")
    s = summarize(load_run(run_dir(tmp_path, "r", two_engine_records()))).data
    keys = {"engines", "infra_retries", *s["engines"], *s["engines"]["by_engine"][0],
            *s["infra_retries"], *s["infra_retries"]["lost"][0], *s["infra_retries"]["last_try"]}
    assert [k for k in sorted(keys) if f"`{k}`" not in doc] == []
