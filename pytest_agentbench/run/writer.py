"""The controller's writes to the run directory: each attempt's line in `attempts.jsonl` (once per
attempt key, redacted, counted) and, at the end, the workers' event files merged into
`events.jsonl`. Everything written passes through the run's redactor; a line torn by a crash is
set aside (`.torn`) before anything is appended, and reported in `RunState.notes`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from typing import Any

from pytest_agentbench.core.rundir import append_jsonl, read_jsonl, repair_jsonl
from pytest_agentbench.run.state import RunState
from pytest_agentbench.run.verdict import Tally
from pytest_agentbench.schemas.records import attempt_key

RedactRecord = Callable[[dict[str, Any]], dict[str, Any]]


class AttemptLog:
    """The one writer of `attempts.jsonl`: one line per attempt, however many reports name it."""

    def __init__(self, state: RunState, redact: RedactRecord) -> None:
        self.state = state
        self.redact = redact
        self.recorded = 0
        self.outcomes: dict[str, int] = {}  # pytest outcome -> attempts
        self.tally = Tally()  # by category, for the exit status (run/verdict.py)
        self._keys: set[str] = set()
        if state.resumed:  # the exit status is the whole run's, not only this session's
            self._count_earlier_records()

    def _count_earlier_records(self) -> None:
        done = set(self.state.done)  # the records of this variant, as the resume collected them
        for record in read_jsonl(self.state.path / "attempts.jsonl", []):
            key = attempt_key(record.get("task_id", ""), record.get("attempt_index", -1))
            if key in done and key not in self._keys:
                self._keys.add(key)
                self.tally.add(record)

    def write(self, record: dict[str, Any]) -> bool:
        """Append `record` unless its attempt already has a line (a late crash report of an
        attempt that finished, its worker dying in teardown); True when written."""
        key = attempt_key(record["task_id"], record["attempt_index"])
        if key in self._keys:
            return False
        append_jsonl(self.state.path / "attempts.jsonl", self.redact(record))
        self._keys.add(key)
        self.recorded += 1
        outcome = record.get("pytest_outcome") or "error"
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        self.tally.add(record)
        return True


def merge_events(state: RunState, redact: RedactRecord | None = None) -> int:
    """Append every worker's event file to events.jsonl (in time order) and remove the parts.

    Each event passes through `redact` once more (the workers redacted with the same run-level
    secrets; this catches an event file written by anything else). Torn or malformed lines of
    a part are skipped and noted in `state.notes`."""
    parts_dir = state.path / "events"
    if not parts_dir.is_dir():
        return 0
    parts = sorted(parts_dir.glob("*.jsonl"))
    events = [e for part in parts for e in read_jsonl(part, state.notes)]
    events.sort(key=lambda e: (str(e.get("ts", "")), str(e.get("attempt_id", "")),
                               e.get("seq", 0) if isinstance(e.get("seq"), int) else 0))
    target = state.path / "events.jsonl"
    note = repair_jsonl(target)
    if note:
        state.notes.append(note)
    with target.open("a", encoding="utf-8") as handle:
        for event in events:
            event = redact(event) if redact else event
            handle.write(json.dumps(event, sort_keys=True, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    for part in parts:
        part.unlink()
    with contextlib.suppress(OSError):  # a part written after the merge stays for the next one
        parts_dir.rmdir()
    return len(events)
