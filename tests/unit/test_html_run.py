"""The run page after the Jinja2 move: what a new user found confusing is now said on the page."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentbench.reporting.html import svg as html_svg
from pytest_agentbench.reporting.html.env import json_payload, task_href
from pytest_agentbench.reporting.html.run_page import render_html, write_html
from pytest_agentbench.reporting.html.timeline import spans
from pytest_agentbench.reporting.load import load_run
from pytest_agentbench.reporting.summary import summarize
from tests.support.synthetic import make_record, write_artifacts, write_run


def _page(tmp_path: Path, records: list[dict]) -> str:
    run = load_run(write_run(tmp_path / "run", records, variant="v", run_id="r"))
    return render_html(run, summarize(run))


def _rec(task: str, passed: bool, reason: str | None = None, quarantined: bool = False,
         attempt: int = 0, attempts: int = 1) -> dict:
    return make_record("r", task, "s", "v", attempt, attempts, passed, reason, 3, 10.0,
                       quarantined=quarantined)


def test_quarantine_precedence_over_flaky_is_explained(tmp_path: Path) -> None:
    page = _page(tmp_path, [_rec("t-ok", True), _rec("t-q", False, "BASELINE_FLAKY", True)])
    assert "+ 1 quarantined task with a flaky baseline, counted as quarantined" in page
    assert "quarantine takes precedence" in page


def test_no_precedence_note_without_quarantined_flaky(tmp_path: Path) -> None:
    page = _page(tmp_path, [_rec("t-ok", True), _rec("t-f", False, "BASELINE_FLAKY")])
    assert "quarantine takes precedence" not in page


def test_task_with_nothing_scored_says_why_not_0_of_0(tmp_path: Path) -> None:
    page = _page(tmp_path, [_rec("t-ok", True), _rec("t-bad", False, "BASELINE_NOT_FAILING")])
    assert "not scored: task invalid" in page
    assert ">0/0<" not in page
    assert 'id="task-t-bad"' in page and 'id="task-t-ok"' in page


def test_cost_panel_says_why_it_is_empty(tmp_path: Path) -> None:
    recs = [_rec("t-a", True), _rec("t-b", False, "TESTS_FAILED")]
    for r in recs:
        r["usage"].update(prompt_tokens=0, completion_tokens=0, total_tokens=0, cost_usd=None,
                          llm_calls=0)
    page = _page(tmp_path, recs)
    assert "No data." not in page
    assert "No model calls in this run" in page
    assert "no model calls: no tokens, no cost" in page  # the cost card, not "$0.00"


def test_flaky_task_says_which_flake(tmp_path: Path) -> None:
    page = _page(tmp_path, [_rec("t-ok", True), _rec("t-v", False, "VERIFIER_FLAKY"),
                            _rec("t-b", False, "BASELINE_FLAKY")])
    assert "not scored: verifier flaky" in page and "not scored: baseline flaky" in page


def test_histogram_has_a_y_axis_with_ticks() -> None:
    import numpy as np

    c = html_svg.histogram(np.array([1.0, 2.0, 2.0, 3.0, 9.0]), np.array([1, 1, 0, 1, 0], bool),
                           "seconds")
    assert c is not None
    labels = [s["text"] for s in c["shapes"] if s["k"] == "text"]
    assert "attempts" in labels and "0" in labels and "2" in labels  # y ticks 0..2 attempts
    assert html_svg.nice_ticks(7) == [0, 2, 4, 6, 8]
    assert html_svg.nice_ticks(100) == [0, 50, 100]
    assert html_svg.nice_ticks(2, whole=True) == [0, 1, 2]  # counts: no 0.5 ticks


def test_pass_at_k_curve_draws_pass_hat_k_when_present(tmp_path: Path) -> None:
    recs = [_rec(f"t{t}", (t + a) % 3 != 0, None if (t + a) % 3 else "TESTS_FAILED", attempt=a,
                 attempts=3) for t in range(4) for a in range(3)]
    page = _page(tmp_path, recs)
    assert 'id="pass-at-k"' in page and 'class="pass-at-k"' in page
    rows = [{"k": 1, "value": 0.5, "tasks": 4, "pass_hat_k": 0.5},
            {"k": 2, "value": 0.8, "tasks": 4, "pass_hat_k": 0.2}]
    c = html_svg.pass_at_k_chart(rows)
    assert c is not None
    classes = {s.get("cls") for s in c["shapes"]}
    assert {"pass-at-k", "pass-hat-k"} <= classes
    c1 = html_svg.pass_at_k_chart([{"k": 1, "value": 0.5, "tasks": 4}])  # no pass^k: one line
    assert c1 is not None and "pass-hat-k" not in {s.get("cls") for s in c1["shapes"]}


def test_timeline_spans_pair_starts_and_finishes() -> None:
    ev = [{"mono_ms": 1000, "type": "phase_started", "phase": "setup"},
          {"mono_ms": 3000, "type": "phase_finished", "phase": "setup", "ok": True},
          {"mono_ms": 3000, "type": "agent_turn_started", "step": 1},
          {"mono_ms": 3100, "type": "tool_call_started", "tool": "read_file", "step": 1},
          {"mono_ms": 3600, "type": "tool_call_finished", "tool": "read_file", "step": 1,
           "ok": False},
          {"mono_ms": 5000, "type": "tool_call_finished", "tool": "run", "step": 2,
           "duration_ms": 400, "ok": True},
          {"mono_ms": 6000, "type": "task_finished"}]
    got = {s[0]: s[1:] for s in spans(ev)}
    assert got["phase setup"] == ["phase", 0.0, 2000.0, True]
    assert got["step 1: read_file"] == ["tool", 2100.0, 2600.0, False]
    assert got["step 2: run"] == ["tool", 3600.0, 4000.0, True]  # from duration_ms
    assert got["turn 1"] == ["turn", 2000.0, 5000.0, None]  # until the last event
    assert spans([]) == []


def test_payload_and_names_are_escaped(tmp_path: Path) -> None:
    evil = _rec("t-<script>x</script>", False, "TOOL_ERROR")
    evil["result"]["summary"] = "</script><script>alert(1)</script>"
    page = _page(tmp_path, [evil])
    assert "<script>x</script>" not in page and "<script>alert(1)" not in page
    assert str(json_payload({"a": "</script>&"})) == '{"a":"\\u003c/script\\u003e\\u0026"}'
    assert task_href("../r/report.html", "a b/<c>") == "../r/report.html#task-a%20b%2F%3Cc%3E"


def test_write_html_links_the_index_only_when_it_exists(tmp_path: Path) -> None:
    run = write_run(tmp_path / "out" / "run", [_rec("t", True)], variant="v", run_id="r")
    write_artifacts(run, _rec("t", True))
    assert "all runs" not in write_html(run).read_text()
    (tmp_path / "out" / "index.html").write_text("x")
    assert 'href="../index.html"' in write_html(run).read_text()


@pytest.mark.parametrize("n", [0, 1])
def test_run_without_attempts_renders(tmp_path: Path, n: int) -> None:
    run = write_run(tmp_path / "run", [_rec("t", True)][:n], variant="v", run_id="r")
    if n == 0:
        (run / "attempts.jsonl").unlink()
    assert "<h1>Run" in write_html(run).read_text()


def test_several_attempts_per_task_show_the_clustered_interval(tmp_path: Path) -> None:
    # 3 tasks x 3 attempts: the pass-rate card quotes the interval clustered by task (the
    # summary's headline then), and still says what the per-attempt Wilson interval would be
    records = [_rec(t, ok, None if ok else "TESTS_FAILED", attempt=i, attempts=3)
               for t, outcomes in (("a", (1, 1, 1)), ("b", (0, 0, 0)), ("c", (1, 0, 1)))
               for i, ok in enumerate(map(bool, outcomes))]
    run = load_run(write_run(tmp_path / "run", records, variant="v", run_id="r"))
    summary = summarize(run)
    clustered = summary.data["pass_rate_clustered"]
    assert summary.data["rules"]["headline_interval"] == "pass_rate_clustered"
    page = render_html(run, summary)
    low, high = clustered["ci_low"] * 100, clustered["ci_high"] * 100
    assert f"clustered by task 95% [{low:.1f}%, {high:.1f}%]" in page
    assert "5/9 scored attempts on 3 tasks" in page


def test_one_attempt_per_task_keeps_wilson_and_cost_per_pass_has_its_interval(
        tmp_path: Path) -> None:
    records = [_rec(f"t{i}", i % 2 == 0, None if i % 2 == 0 else "TESTS_FAILED")
               for i in range(8)]
    run = load_run(write_run(tmp_path / "run", records, variant="v", run_id="r"))
    summary = summarize(run)
    page = render_html(run, summary)
    assert "clustered by task" not in page and "Wilson 95%" in page
    per_pass = summary.data["usage"]["cost_per_pass"]
    assert per_pass["ci_low"] is not None and per_pass["ci_high"] is not None
    assert (f"per pass ${per_pass['value']:.4f} [${per_pass['ci_low']:.4f}, "
            f"${per_pass['ci_high']:.4f}]") in page
