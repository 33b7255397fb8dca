"""The viewer's data: live state tailed from a run's event parts (viewer/live.py), the runs and
run payloads (viewer/data.py) and search across runs (viewer/search.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentbench.viewer.data import NotFound, Store
from pytest_agentbench.viewer.live import LiveRuns, attempt_index
from pytest_agentbench.viewer.search import search
from tests.support.viewer_roots import EVIL_COMMAND, EVIL_TASK, LiveRun, paired_root


def test_live_attempts_follow_the_event_parts(tmp_path: Path) -> None:
    live = LiveRun(tmp_path)
    runs = LiveRuns()
    assert runs.status(live.path)["attempts"] == {}
    live.start("t1")
    live.phase("t1", "agent")
    live.step("t1", 3, "run")
    with live.part.open("a") as fh:
        fh.write('{"attempt_id": "torn')  # a line being written: waits for its newline
    (attempt,) = runs.status(live.path)["attempts"].values()
    assert (attempt["task_id"], attempt["phase"], attempt["step"], attempt["tool"],
            attempt["index"], attempt["finished"]) == ("t1", "agent", 3, "run", 0, False)
    with live.part.open("a") as fh:
        fh.write('"}\n')  # the torn line completed: JSON, but no event (no type)
    live.finish("t1", passed=False)
    status = runs.status(live.path)
    (attempt,) = status["attempts"].values()
    assert attempt["finished"] and attempt["reason"] == "TESTS_FAILED"
    assert attempt["events"] == 4 and status["live"]
    live.end()
    assert runs.status(live.path) == {"live": False, "idle_sec": None, "attempts": {}}


def test_a_linked_event_part_is_not_read(tmp_path: Path) -> None:
    live = LiveRun(tmp_path / "runs")
    outside = tmp_path / "outside.jsonl"
    outside.write_text(json.dumps({"attempt_id": "x:y:z:0@s", "task_id": "leaked",
                                   "type": "task_started"}) + "\n")
    (live.part.parent / "other-gw1.jsonl").symlink_to(outside)
    assert LiveRuns().status(live.path)["attempts"] == {}


def test_attempt_index() -> None:
    assert attempt_index("run:task:variant:2@abc") == 2
    assert attempt_index("run:t:a:b:v:0") == 0
    assert attempt_index("odd") is None


def test_runs_and_run_payloads_list_running_attempts_until_recorded(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    store = Store(root)
    assert store.runs()["runs"] == []
    live = LiveRun(root)
    live.start("t1")
    live.phase("t1", "setup")
    (row,) = store.runs()["runs"]
    assert row["live"] and row["figures"] is None
    assert [a["task_id"] for a in row["running"]] == ["t1"]
    live.finish("t1", passed=True)
    run = store.run("run-live")
    assert run["live"] and run["running"] == [] and len(run["attempts"]) == 1
    assert store.runs()["runs"][0]["figures"]["passed"] == 1
    live.end()
    assert store.run("run-live")["live"] is False


def test_attempt_payload_and_not_found(tmp_path: Path) -> None:
    store = Store(paired_root(tmp_path))
    data = store.attempt("run-a", EVIL_TASK, 0)
    assert data["attempt"]["reason"] == "TOOL_ERROR"
    assert [c["title"] for c in data["attempt"]["tool_calls"]][-1] == "step 3: run"
    assert EVIL_TASK in data["tasks"] and data["indexes"] == [0]
    for args in (("run-a", EVIL_TASK, 1), ("run-a", "no-task", 0), ("leak", EVIL_TASK, 0)):
        with pytest.raises(NotFound):
            store.attempt(*args)


def test_search_by_each_field(tmp_path: Path) -> None:
    store = Store(paired_root(tmp_path))

    def found(query: str, where: str) -> set[tuple[str, str, str]]:
        return {(h["run"], h["task_id"], h["field"]) for h in search(store, query, where)["hits"]}

    assert found("TASK-00", "task") == {(r, f"task-00{i}", "task") for r in ("run-a", "run-b")
                                        for i in range(8)}
    assert found("tool_error", "reason") == {("run-a", EVIL_TASK, "reason")}
    assert found("window.__xss=2", "reason") == {("run-a", EVIL_TASK, "reason")}  # summary
    assert found("test_<b>bold", "signature") == {(r, EVIL_TASK, "signature")
                                                  for r in ("run-a", "run-b")}
    assert found("pytest -q tests/test_evil", "command") == {(r, EVIL_TASK, "command")
                                                             for r in ("run-a", "run-b")}
    assert found("onerror", "all") >= {("run-a", EVIL_TASK, "task"),
                                       ("run-a", EVIL_TASK, "command")}
    assert found("   ", "all") == set()
    hit = search(store, "pytest -q", "command")["hits"][0]
    assert hit["text"] == EVIL_COMMAND
    assert search(store, "task", "all", max_hits=3)["more"] is True
    with pytest.raises(ValueError, match="in='cmd'"):
        search(store, "x", "cmd")
