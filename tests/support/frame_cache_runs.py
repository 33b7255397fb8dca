"""The runs the frame cache tests load (tests/unit/frame_cache/): every kind of record the tests
and the plugin write, and what "the same frame" means."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

import pytest_agentbench.reporting.load as load
from tests.support.synthetic import make_record, synthetic_records, write_run

FIELDS = ("summary", "pairing", "all")


def _retried(task: str, engines: tuple[str, ...], passed: bool) -> dict[str, Any]:
    r = copy.deepcopy(make_record("run-e", task, "custom-dev", "v", 0, 1, passed,
                                  None if passed else "SANDBOX_ERROR", steps=3, duration=9.5))
    r["engine"] = "default"
    r["retried"] = [{"engine": e, "failure_reason": "SANDBOX_ERROR", "sub_reason": "ENGINE_LOST",
                     "summary": f"engine {e} lost", "duration_sec": 7.0 + i,
                     "artifacts_dir": f"tasks/{task}.try{i + 1}"} for i, e in enumerate(engines)]
    return r


def _invalid(task: str) -> dict[str, Any]:
    r = copy.deepcopy(make_record("run-i", task, "s", "v", 0, 1, False, "TASK_INVALID", 0, 0.0))
    r.update(task_commit="", artifact_paths={"task_dir": ""})
    r["usage"]["cost_usd"] = None
    r["result"]["summary"] = "task.yaml: repo.commit: field required\n\u00e9\u4e2d\u0000 nul"
    return r


def _quoted(i: int) -> dict[str, Any]:
    r = make_record("run-q", f"t-\u00e9-{i}", "s\"uite", "v", 0, 1, False, "TESTS_FAILED", 2,
                    1.25, summary_ix=i % 4)
    r["result"]["signature"] = [f"tests/test_\u4e2d.py::t[{i}\\n]", "x\ty"]
    return r


def lines_of(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


RUNS: dict[str, Callable[[Path], Path]] = {
    "synthetic, 3 attempts a task (invalid, flaky, quarantined)": lambda d: write_run(
        d, synthetic_records(600, attempts=3, seed=5, run_id="syn"), run_id="syn"),
    "engines and infra retries": lambda d: write_run(d, [
        _retried("t1", (), True), _retried("t2", ("second",), True),
        _retried("t3", ("second", "third"), False), _retried("t4", ("x",), False)]),
    "records from before engines (no engine, no retried)": lambda d: write_run(d, [
        {k: v for k, v in make_record("r", f"t{i}", "s", "v", 0, 1, i % 2 == 0,
                                      None if i % 2 == 0 else "AGENT_GAVE_UP", 3, 2.0).items()
         if k not in ("engine", "retried")} for i in range(5)]),
    "invalid tasks only (no artifact paths, odd text)": lambda d: write_run(
        d, [_invalid(f"bad{i}") for i in range(4)]),
    "quotes, tabs and non-ASCII everywhere": lambda d: write_run(
        d, [_quoted(i) for i in range(8)]),
    "a single record": lambda d: write_run(
        d, [make_record("one", "t", "s", "v", 0, 1, True, None, 1, 1.0)]),
}


def _with_tail(d: Path, tail: str) -> Path:
    run = write_run(d, synthetic_records(40, attempts=2, seed=9, run_id="w"), run_id="w")
    with (run / "attempts.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(tail)
    return run


RUNS["a truncated last line"] = lambda d: _with_tail(d, '{"run_id": "w", "task_id": "t')
RUNS["a resumed run's duplicate records"] = lambda d: _with_tail(d, lines_of(list(
    synthetic_records(6, attempts=2, seed=9, run_id="w", skill=-0.5))))


def frames_equal(a: load.Run, b: load.Run) -> None:
    pd.testing.assert_frame_equal(a.attempts, b.attempts, check_exact=True)
    assert list(a.attempts.columns) == list(b.attempts.columns)
    assert a.warnings == b.warnings
    for column in ("retried", "retry_engines", "signature"):
        kinds_a = [type(v) for v in a.attempts[column]]
        assert kinds_a == [type(v) for v in b.attempts[column]], column
