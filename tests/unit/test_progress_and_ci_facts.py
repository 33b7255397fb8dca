"""The pieces of live progress and CI outputs that need no pytest run: which events are shown at
which verbosity, the workers' event-file tail, the EventSink listener, the failed setup command's
tail, the facts junit/JSON carry and the --durations rebooking (issue 11, points 7 and 9).
The plugin runs themselves are in tests/e2e/test_progress_ci_outputs.py."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_agentbench.core.before_agent import TAIL_LINE_CHARS, failure_tail
from pytest_agentbench.core.event_sink import EventSink
from pytest_agentbench.plugin.ci_outputs import (
    _rebook_duration,
    attempt_facts,
    call_seconds,
    junit_properties,
)
from pytest_agentbench.plugin.progress import EventTail, _live_log_level, describe
from pytest_agentbench.sandbox.port import ExecResult
from pytest_agentbench.schemas.events import Note, PhaseFinished, PhaseStarted, ToolCallStarted
from pytest_agentbench.text.redaction import Redactor

RECORD: dict[str, Any] = {
    "run_id": "r1",
    "attempt_id": "r1:t:oracle:0@s",
    "duration_sec": 10.0,
    "timings": {"prepare": 1.0, "setup": 2.0, "baseline": 1.0, "agent": 4.0, "score": 1.5,
                "sandbox_start": 0.2},
    "result": {"passed": False, "failure_reason": "WRONG_FIX", "sub_reason": None},
    "artifact_paths": {"task_dir": "tasks/t"},
}


def event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "task_id": "t", "attempt_id": "r1:t:oracle:1@s", "mono_ms": 1500,
            **fields}


# --------------------------------------------------------------------------- progress lines


def test_phases_need_v_steps_need_vv_and_the_rest_is_not_shown() -> None:
    assert describe(event("phase_started", phase="setup"), 1) == (1, "t: setup (+1.5s)")
    assert describe(event("phase_finished", phase="setup", ok=False), 1) == (
        1, "t: setup failed (+1.5s)")
    assert describe(event("phase_finished", phase="setup", ok=True), 1) is None
    assert describe(event("tool_call_started", step=3, tool="run"), 1) == (
        2, "t: agent step 3: run (+1.5s)")
    assert describe(event("command_finished"), 1) is None
    # several attempts of a task: which one (1-based), from the attempt id
    assert describe(event("phase_started", phase="agent"), 3) == (1, "t attempt 2: agent (+1.5s)")


def test_event_tail_reads_only_complete_new_lines_of_each_worker(tmp_path: Path) -> None:
    delivered: list[Any] = []
    tail = EventTail(tmp_path, "sess-", delivered.extend)
    gw0, other = tmp_path / "sess-gw0.jsonl", tmp_path / "other-gw0.jsonl"
    line = json.dumps(event("phase_started", phase="agent"))
    gw0.write_text(line + "\n" + json.dumps(event("note")) + "\n" + line[:10])
    other.write_text(line + "\n")  # another session's file: not ours
    assert [(w, e["phase"]) for w, e in tail.poll()] == [("gw0", "agent")]
    with gw0.open("a") as handle:  # the torn line completed, then a torn-garbage line
        handle.write(line[10:] + "\n{not json\n")
    assert [(w, e["phase"]) for w, e in tail.poll()] == [("gw0", "agent")]
    assert tail.poll() == []


def test_event_tail_thread_delivers_and_stops(tmp_path: Path) -> None:
    delivered: list[Any] = []
    tail = EventTail(tmp_path, "s-", delivered.extend)
    tail.start()
    (tmp_path / "s-gw1.jsonl").write_text(json.dumps(event("phase_started", phase="score")) + "\n")
    deadline = time.monotonic() + 5
    while not delivered and time.monotonic() < deadline:
        time.sleep(0.05)
    tail.stop()
    assert not tail.thread.is_alive()
    assert [(w, e["phase"]) for w, e in delivered] == [("gw1", "score")]


# --------------------------------------------------------------------------- the sink's listener


def test_listener_sees_each_event_redacted_in_order_and_cannot_break_the_sink(
    tmp_path: Path,
) -> None:
    seen: list[dict[str, Any]] = []
    redactor = Redactor(["s3cr3t-value"])
    sink = EventSink(tmp_path / "e.jsonl", "r", "t", "a", redactor.redact_obj, listener=seen.append)
    sink.emit(PhaseStarted(phase="setup"))
    sink.emit(Note(kind="k", message="uses s3cr3t-value"))
    assert [e["seq"] for e in seen] == [0, 1]
    assert "s3cr3t-value" not in json.dumps(seen)

    def broken(_: dict[str, Any]) -> None:
        raise RuntimeError("display gone")

    sink.listener = broken
    sink.emit(PhaseFinished(phase="setup", ok=True, duration_ms=1))
    sink.emit(ToolCallStarted(tool="run", step=1, inputs_sha256="x"))
    assert len((tmp_path / "e.jsonl").read_text().splitlines()) == 4


# --------------------------------------------------------------------------- setup failure tail


def result(stdout: str = "", stderr: str = "") -> ExecResult:
    return ExecResult(exit_code=1, stdout=stdout, stderr=stderr, duration_ms=5)


def test_failure_tail_is_the_last_lines_of_stderr_redacted_and_bounded() -> None:
    redact = Redactor(["hunter2-secret"]).redact
    stderr = "".join(f"line {i}\n" for i in range(40)) + "token=hunter2-secret\n" + "x" * 5000
    tail = failure_tail(result(stdout="ignored", stderr=stderr), redact)
    lines = tail.splitlines()
    assert lines[0] == "  last 15 lines of its stderr:"
    assert len(lines) == 16 and lines[1] == "    line 27"
    assert "hunter2-secret" not in tail and "token=" in tail
    assert lines[-1].endswith(" [...]") and len(lines[-1]) == 4 + TAIL_LINE_CHARS + 6


def test_failure_tail_falls_back_to_stdout_and_is_empty_without_output() -> None:
    assert failure_tail(result(stdout="pip: no such package\n", stderr=" \n"), str) == (
        "  last 1 lines of its stdout:\n    pip: no such package\n")
    assert failure_tail(result(), str) == ""


def test_failure_tail_of_a_huge_output_drops_the_cut_fragment() -> None:
    stderr = "a" * 100_000 + "\nlast\n"
    assert failure_tail(result(stderr=stderr), str).splitlines()[1:] == ["    last"]


# --------------------------------------------------------------------------- CI facts, durations


def test_attempt_facts_are_absolute_and_give_the_reason_and_phase_durations() -> None:
    facts = attempt_facts(RECORD, Path("/runs/r1"))
    assert facts["artifacts"] == "/runs/r1/tasks/t" and facts["run_dir"] == "/runs/r1"
    assert facts["reason"] == "WRONG_FIX" and facts["sub_reason"] == ""
    assert list(facts["phase_durations"]) == ["prepare", "setup", "baseline", "agent", "score"]
    passed = {**RECORD, "result": {"passed": True, "failure_reason": None}}
    assert attempt_facts(passed, Path("/r"))["reason"] == "PASSED"
    props = dict(junit_properties(facts))
    assert props["agentbench.reason"] == "WRONG_FIX"
    assert props["agentbench.duration.agent"] == 4.0 and "agentbench.phase_durations" not in props


def test_durations_move_agent_and_score_from_setup_to_call_keeping_the_total() -> None:
    item = SimpleNamespace()
    setup = SimpleNamespace(when="setup", passed=True, duration=10.2)
    call = SimpleNamespace(when="call", passed=False, duration=0.01)
    _rebook_duration(item, setup, RECORD)  # type: ignore[arg-type]
    _rebook_duration(item, call, RECORD)  # type: ignore[arg-type]
    assert call_seconds(RECORD) == 5.5
    assert setup.duration == pytest.approx(4.7) and call.duration == pytest.approx(5.51)
    errored = SimpleNamespace(when="setup", passed=False, duration=10.2)
    _rebook_duration(SimpleNamespace(), errored, RECORD)  # type: ignore[arg-type]
    assert errored.duration == 10.2  # no call follows an ERROR: its time stays in setup


@pytest.mark.parametrize(
    ("options", "ini", "level"),
    [
        ({}, {}, logging.CRITICAL + 1),  # no live logging
        ({"log_cli_level": "INFO"}, {}, logging.INFO),
        ({"log_cli_level": "warning"}, {}, logging.WARNING),  # -v lines stay: no INFO records
        ({}, {"log_cli": True, "log_cli_level": "DEBUG"}, logging.DEBUG),
        ({"log_level": "INFO"}, {"log_cli": True}, logging.INFO),
        ({}, {"log_cli": True}, logging.WARNING),
        ({"log_cli_level": "15"}, {}, 15),
    ],
)
def test_live_log_level(options: dict[str, Any], ini: dict[str, Any], level: int) -> None:
    config = SimpleNamespace(getoption=lambda name, default=None: options.get(name, default),
                             getini=lambda name: ini.get(name, ""))
    assert _live_log_level(config) == level  # type: ignore[arg-type]
