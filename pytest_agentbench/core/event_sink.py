"""The event sink: takes an event object (schemas/events.py), adds the envelope, redacts, appends
one JSON line.

Each worker writes its own file; the controller merges them at session end (one writer per file).
A line torn by a writer killed mid-line is set aside before the first new line (core.rundir).

A `listener` (AttemptConfig.event_listener) sees each event as written (redacted, with its
envelope), after the line is appended: the pytest plugin's live progress. It runs in the emitting
thread under the sink's lock (events reach it in `seq` order), so it must be quick; whatever it
raises is swallowed, a display never fails an attempt.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agentbench.core.rundir import repair_jsonl
from pytest_agentbench.schemas.events import Actor, Envelope, Event, utc_now

RedactObj = Callable[[Any], Any]
EventListener = Callable[[dict[str, Any]], None]


class EventSink:
    """Events of one attempt, appended to `path`."""

    def __init__(
        self,
        path: Path | None,
        run_id: str,
        task_id: str,
        attempt_id: str,
        redact_obj: RedactObj | None = None,
        listener: EventListener | None = None,
    ) -> None:
        self.path = path
        self.listener = listener
        self.ids = {"run_id": run_id, "task_id": task_id, "attempt_id": attempt_id}
        # Redaction works on the values, before serializing: a pattern run over JSON text could
        # swallow quotes and keys, or miss a secret that JSON escaping changed.
        self.redact_obj = redact_obj or (lambda obj: obj)
        self.seq = 0
        self.start = time.monotonic()
        self.lock = threading.Lock()
        self.emitted: list[dict[str, Any]] = []  # kept in memory for the record and tests
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            repair_jsonl(path)  # a crashed predecessor's fragment must not swallow our first line

    def emit(
        self,
        event: Event,
        /,
        actor: Actor = "harness",
        parent_event_id: str | None = None,
        span_id: str | None = None,
    ) -> str:
        """Write one event (a class of schemas/events.py: `sink.emit(CommandFinished(...))`)
        with its envelope; returns its event id."""
        with self.lock:
            event_id = uuid.uuid4().hex
            envelope = Envelope(
                event_id=event_id,
                seq=self.seq,
                ts=utc_now(),
                mono_ms=int((time.monotonic() - self.start) * 1000),
                actor=actor,
                parent_event_id=parent_event_id,
                span_id=span_id,
                **self.ids,
            )
            self.seq += 1
            # the envelope's fields, then `type`, then the payload's: one flat JSON object
            written = envelope.model_dump(mode="json") | event.model_dump(mode="json")
            data = self.redact_obj(written)
            line = json.dumps(data, ensure_ascii=False)
            self.emitted.append(data)
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as handle:
                    handle.write(line + "\n")
            if self.listener is not None:
                with contextlib.suppress(Exception):  # a progress display only
                    self.listener(data)
        return event_id

    def of_type(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.emitted if e["type"] == type_]
