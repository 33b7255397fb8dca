"""The event sink writes typed event objects (schemas/events.py) as one flat JSON line each: the
envelope's fields, then `type`, then the payload's, redacted value by value (issue 9 item 5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pydantic
import pytest

from pytest_agentbench.core.event_sink import EventSink
from pytest_agentbench.schemas.events import (
    CommandFinished,
    Envelope,
    EventAdapter,
    Note,
    ToolCallStarted,
)


def redact(obj: Any) -> Any:
    return json.loads(json.dumps(obj).replace("sk-SECRET", "***"))


def test_a_line_is_the_envelope_then_the_event(tmp_path: Path) -> None:
    sink = EventSink(tmp_path / "events.jsonl", "run", "task", "attempt", redact)
    first = sink.emit(CommandFinished(phase="setup", command="pip install sk-SECRET",
                                      exit_code=0, duration_ms=5))
    sink.emit(ToolCallStarted(tool="run", step=1, inputs_sha256="ab"), actor="tool",
              parent_event_id=first)
    sink.emit(Note(kind="k", message="m", data={"token": ["sk-SECRET"]}))
    lines = (tmp_path / "events.jsonl").read_text("utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    envelope = list(Envelope.model_fields)
    assert list(rows[0]) == [*envelope, "type", *(f for f in CommandFinished.model_fields
                                                  if f != "type")]
    assert rows[0]["command"] == "pip install ***" and rows[2]["data"] == {"token": ["***"]}
    assert [r["seq"] for r in rows] == [0, 1, 2] and rows[0]["event_id"] == first
    assert (rows[1]["actor"], rows[1]["parent_event_id"]) == ("tool", first)
    assert rows[0]["actor"] == "harness"
    assert (rows[0]["run_id"], rows[0]["task_id"], rows[0]["attempt_id"]) == (
        "run", "task", "attempt")
    for line in lines:
        EventAdapter.validate_json(line)
    assert sink.emitted == rows


def test_an_event_with_a_wrong_field_is_refused_where_it_is_made() -> None:
    with pytest.raises(pydantic.ValidationError):
        Note(kind="k", message="m", bogus=1)  # type: ignore[call-arg]  # mypy says so too


def test_a_written_line_must_have_its_envelope_and_no_stray_field(tmp_path: Path) -> None:
    sink = EventSink(tmp_path / "events.jsonl", "run", "task", "attempt")
    sink.emit(Note(kind="k", message="m"))
    row = json.loads((tmp_path / "events.jsonl").read_text("utf-8"))
    for broken in ({k: v for k, v in row.items() if k != "seq"}, {**row, "stray": 1}):
        with pytest.raises(pydantic.ValidationError):
            EventAdapter.validate_python(broken)
