"""The exit status's categories (run/verdict.py, one record at a time) are the reports' (the
frame in reporting/load.py): the same precedence, quarantined > flaky > invalid > infra >
scored, for every reason code. Two implementations of one rule: this keeps them one rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.core.attempt_record import invalid_task_record
from pytest_agentbench.reporting.load import load_run
from pytest_agentbench.run.verdict import category
from pytest_agentbench.schemas.taxonomy import Reason


def _records() -> list[dict[str, Any]]:
    base = invalid_task_record(
        run_id="r", session_token="s", task_id="t", suite="x", variant="v",
        variant_config_hash="h", worker="master", problems=["p"],
    ).to_json_dict()
    records = []
    for reason in [None, *Reason]:
        for quarantined in (None, "quarantined on purpose"):
            for flaky in (False, True):
                index = len(records)
                records.append({
                    **base,
                    "attempt_index": index,
                    "attempt_id": f"r:t:v:{index}",
                    "quarantined": quarantined,
                    "result": {**base["result"], "passed": reason is None,
                               "failure_reason": reason and reason.value},
                    "baseline_validation": {**base["baseline_validation"], "is_flaky": flaky},
                })
    return records


# records without artifact paths (invalid tasks, crashed workers) load without pandas' warning,
# which becomes an error in pandas 4
@pytest.mark.filterwarnings("error::pandas.errors.Pandas4Warning")
def test_every_reason_falls_in_the_same_category_for_both(tmp_path: Path) -> None:
    records = _records()
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "suites": ["x"]}))
    (tmp_path / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    frame = load_run(tmp_path).attempts.sort_values("attempt_index")
    assert list(frame["category"].astype(str)) == [category(r) for r in records]
    assert set(frame["category"].astype(str)) == {"scored", "infra", "invalid", "flaky",
                                                  "quarantined"}
