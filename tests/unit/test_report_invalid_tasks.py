"""Tasks whose task.yaml failed validation (TASK_INVALID records) in the summary, HTML and gate.

Such a record never ran: attempt 0, no commit, zero durations, the problems in result.summary.
It must show up (a task row, a taxonomy entry), count among the tasks, stay out of agent pass
rates, and not stop a pairing with a run where the task was valid.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest_agentbench.reporting.html.run_page as html
import pytest_agentbench.reporting.load as load
import pytest_agentbench.reporting.render as render
from pytest_agentbench.reporting.gate import gate
from pytest_agentbench.reporting.load import load_run, load_runs, records_to_frame
from pytest_agentbench.reporting.paired import compare
from pytest_agentbench.reporting.summary import summarize
from pytest_agentbench.schemas.records import AttemptRecord
from tests.support.synthetic import make_record, write_run

PROBLEMS = "task.yaml: repo.commit: field required\ntask.yaml: validation: unknown key 'x'"


def invalid_record(task: str, suite: str = "s", run_id: str = "run-x") -> dict[str, Any]:
    """A record as the plugin writes it for a task whose spec failed validation."""
    r = copy.deepcopy(make_record(run_id, task, suite, "v", 0, 1, False, "TASK_INVALID",
                                  steps=0, duration=0.0))
    r.update(task_commit="", duration_sec=0.0, pytest_outcome="error",
             timings={}, artifact_paths={"task_dir": ""})
    r["usage"] = {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
                  "cost_usd": None, "retries": 0, "llm_latency_ms": 0}
    r["agent"] = {"steps": 0, "tool_calls": 0, "finished_by": None}
    r["setup"] = {"attempted": False, "ok": False, "duration_sec": 0.0, "commands": 0}
    r["baseline_validation"] = {"attempted": False}
    r["result"] = {"passed": False, "exit_code": None, "failure_reason": "TASK_INVALID",
                   "summary": PROBLEMS, "signature": []}
    AttemptRecord.model_validate(r)
    return r


def good(task: str, passed: bool, attempt: int = 0, attempts: int = 1,
         run_id: str = "run-x") -> dict[str, Any]:
    return make_record(run_id, task, "s", "v", attempt, attempts, passed,
                       None if passed else "TESTS_FAILED", steps=3, duration=5.0)


def _run(tmp_path: Path, name: str, records: list[dict[str, Any]]) -> Path:
    return write_run(tmp_path / name, records, variant=name, run_id=f"run-{name}")


def test_invalid_record_is_a_task_counted_apart() -> None:
    flat = load._adapter("all").validate_python  # nested record -> the loader's flat row
    frame = records_to_frame([flat(r) for r in (invalid_record("bad"), good("a", True),
                                                 good("b", False), good("c", True))])
    row = frame.set_index("task_id").loc["bad"]
    assert row["category"] == "invalid" and row["blame"] == "task"


def test_summary_counts_tasks_and_lists_invalid_ones(tmp_path: Path) -> None:
    path = _run(tmp_path, "r", [good("a", True), good("b", False), good("c", True),
                                invalid_record("bad")])
    s = summarize(load_run(path, fields="summary"))
    c = s.data["counts"]
    assert c["tasks"] == 4 and c["attempts"] == 4  # 4 items, 4 tasks
    assert c["invalid"] == 1 and c["invalid_by_reason"] == {"TASK_INVALID": 1}
    assert c["tasks_by_category"]["invalid"] == 1 and c["tasks_by_category"]["scored"] == 3
    assert s.data["pass_rate"]["scored"] == 3 and s.data["pass_rate"]["passed"] == 2
    assert s.data["invalid_tasks"] == [{
        "task_id": "bad", "suite": "s", "reasons": ["TASK_INVALID"], "attempts": 1,
        "problems": PROBLEMS.splitlines()}]
    assert any(r["reason"] == "TASK_INVALID" and r["blame"] == "task"
               for r in s.data["taxonomy"]["by_reason"])
    md = render.summary_markdown(s)
    assert "**4 tasks** (3 scored, 1 invalid)" in md and "4 attempts" in md
    assert "## Invalid tasks" in md and "repo.commit: field required" in md
    assert "unknown key \\'x\\'" in md or "unknown key 'x'" in md
    assert all(t["task_id"] != "bad" for t in s.data["hardest_tasks"])


def test_html_shows_the_invalid_task_and_counts_tasks_with_tasks(tmp_path: Path) -> None:
    path = _run(tmp_path, "r", [good("a", True, 0, 2), good("a", False, 1, 2),
                                good("b", True), invalid_record("bad")])
    run = load_run(path)
    page = html.render_html(run, summarize(run))
    cards = page.split('<div class="cards">')[1].split("</div></div>")[0]
    assert "<b>3</b><span class=\"muted\">4 attempts" in cards  # tasks card: 3 tasks
    assert "invalid tasks</span><b>1</b>" in cards  # a task count beside the task count
    row = page.split('data-search="bad')[0].rsplit("<tr", 1)[1] + page.split(
        'data-search="bad')[1].split("</tr>")[0]
    assert 'data-status="excluded"' in row and "invalid" in row and "0/0" not in row
    data = json.loads(page.split('id="ab-data">')[1].split("</script>")[0])
    bad = next(t for t in data["tasks"] if t["task_id"] == "bad")["attempts"][0]
    assert bad["reason"] == "TASK_INVALID" and bad["missing"] == []
    assert "repo.commit: field required" in bad["summary"]


def test_gate_pairs_runs_where_a_task_was_invalid_in_one(tmp_path: Path) -> None:
    tasks = [f"t{i}" for i in range(6)]
    a = _run(tmp_path, "a", [good(t, True, k, 2, "run-a") for t in tasks for k in (0, 1)]
             + [good("fixed", True, k, 2, "run-a") for k in (0, 1)])
    b = _run(tmp_path, "b", [good(t, True, k, 2, "run-b") for t in tasks for k in (0, 1)]
             + [invalid_record("fixed", run_id="run-b")])
    ra, rb = load_runs([a, b])
    report = compare(ra, rb)  # missing="fail": the invalid task's other attempt is no problem
    ex = report.data["exclusions"]
    assert ex["invalid_or_flaky_tasks"] == 1 and report.data["pairs"] == 12
    result = gate(ra, rb)  # 12 pairs cannot rule out a 5-point drop: inconclusive, not refused
    assert not result.regression and result.outcome == "inconclusive"
    assert "1 invalid or flaky task(s)" in result.data["verdict"]


def test_the_plugins_own_record_pairs_and_counts(tmp_path: Path) -> None:
    """The record as core.attempt_record writes it (spec-default limits, no image, no commit)."""
    from pytest_agentbench.core.attempt_record import invalid_task_record

    real = invalid_task_record(run_id="run-b", session_token="tok", task_id="fixed", suite="s",
                               variant="b", variant_config_hash="h", worker="master",
                               problems=PROBLEMS.splitlines()).to_json_dict()
    real["harness_version"] = "0.1.0+synthetic"
    a = _run(tmp_path, "a", [good(t, True, 0, 1, "run-a") for t in ("t1", "t2", "fixed")])
    b = _run(tmp_path, "b", [good(t, True, 0, 1, "run-b") for t in ("t1", "t2")] + [real])
    summary = summarize(load_run(b))
    assert summary.data["counts"]["tasks"] == 3
    assert summary.data["invalid_tasks"][0]["problems"] == PROBLEMS.splitlines()
    result = gate(*load_runs([a, b]), inconclusive_ok=True)
    assert result.exit_code == 0 and result.data["paired"]["pairs"] == 2
