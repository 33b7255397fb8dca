"""Small run directories of valid records for the reporting tests (tests/unit/test_reports*.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from pytest_agentbench.schemas.records import AttemptRecord
from tests.support.synthetic import make_record, write_run


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
