"""The terminal summary's count of recorded attempts: singular for one, and after a resume the
session's count beside the run's, which the pass rate line is over (issue 22 polish)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_agentbench.plugin.exit_status import recorded_line
from pytest_agentbench.run.state import RunState
from pytest_agentbench.run.writer import AttemptLog
from pytest_agentbench.schemas.records import attempt_key


def record(task: str, passed: bool = True) -> dict[str, Any]:
    return {"task_id": task, "attempt_index": 0, "pytest_outcome": "passed" if passed else
            "failed", "result": {"passed": passed, "failure_reason": None if passed else
                                 "TESTS_FAILED"}}


def log_of(tmp_path: Path, earlier: list[str]) -> AttemptLog:
    lines = [json.dumps(record(task)) + "\n" for task in earlier]
    (tmp_path / "attempts.jsonl").write_text("".join(lines))
    state = RunState("r", str(tmp_path), "h", "s", done=[attempt_key(t, 0) for t in earlier],
                     resumed=bool(earlier))
    return AttemptLog(state, lambda r: r)


def test_one_attempt_is_singular(tmp_path: Path) -> None:
    log = log_of(tmp_path, [])
    log.write(record("a"))
    assert recorded_line(log) == "1 attempt recorded (1 passed)"
    log.write(record("b", passed=False))
    assert recorded_line(log) == "2 attempts recorded (1 failed, 1 passed)"


def test_a_resumed_run_counts_the_session_and_the_run(tmp_path: Path) -> None:
    log = log_of(tmp_path, ["a", "b"])
    log.write(record("c"))
    log.write(record("d"))
    assert recorded_line(log) == "2 attempts recorded in this session (2 passed), 4 in the run"
    assert log.tally.passed == log.tally.scored == 4  # what "pass rate ...: 4/4" counts


def test_nothing_recorded(tmp_path: Path) -> None:
    assert recorded_line(log_of(tmp_path, [])) == "0 attempts recorded (none)"
