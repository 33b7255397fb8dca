"""Timing of an attempt's phases, as `phase_started`/`phase_finished` events and a timings map."""

from __future__ import annotations

import time

from pytest_agentbench.core.event_sink import EventSink
from pytest_agentbench.schemas.events import PhaseFinished, PhaseStarted


class PhaseTimer:
    def __init__(
        self, events: EventSink, timings: dict[str, float], name: str, emit: bool = True
    ) -> None:
        self.events, self.timings, self.name, self.emit = events, timings, name, emit

    def __enter__(self) -> None:
        self.start = time.monotonic()
        if self.emit:
            self.events.emit(PhaseStarted(phase=self.name))

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        seconds = time.monotonic() - self.start
        self.timings[self.name] = round(self.timings.get(self.name, 0) + seconds, 3)
        if self.emit:
            self.events.emit(
                PhaseFinished(
                    phase=self.name,
                    ok=exc is None,
                    duration_ms=int(seconds * 1000),
                    detail=str(exc)[:300] if exc else "",
                )
            )
