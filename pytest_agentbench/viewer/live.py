"""What a run in progress is doing, from the files it writes while it goes.

Each worker (the controller too, without xdist) appends its attempts' events to
`events/<session>-<worker>.jsonl` in the run directory; at the run's end the controller merges them
into `events.jsonl` and removes the folder (run/writer.py, run/finish.py). So a run with part files
is in progress (or was stopped so hard that its end never ran: then its files stop changing, and
`idle_sec` says for how long). Finished attempts are the lines of `attempts.jsonl`.

`LiveRuns` tails each part file from where it stopped last time (new complete lines only), and
keeps per attempt its task, phase, agent step and tool, so a poll costs what was appended since
the last one. Files are opened the way reporting/run_files.py opens them: no link followed, only
regular files.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_agentbench.reporting.run_files import list_dir, open_dir

EVENTS_DIR = "events"
MAX_READ = 8 * 1024 * 1024  # bytes read from one part file per poll; the rest next time
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_STEP_EVENTS = ("tool_call_started", "agent_turn_started", "llm_request")


@dataclass
class LiveAttempt:
    """One attempt as its events tell it so far."""

    attempt_id: str
    task_id: str
    index: int | None
    worker: str = ""
    started: str = ""
    last_ts: str = ""
    phase: str = ""
    step: int | None = None
    tool: str = ""
    events: int = 0
    failed_phase: str = ""
    finished: bool = False
    passed: bool | None = None
    reason: str | None = None


def attempt_index(attempt_id: str) -> int | None:
    """`<run>:<task>:<variant>:<index>@<session>` -> index (None for another form)."""
    tail = attempt_id.split("@")[0].rpartition(":")[2]
    return int(tail) if tail.isdigit() else None


def apply_event(attempts: dict[str, LiveAttempt], event: dict[str, Any]) -> None:
    """Fold one event into the per-attempt state."""
    attempt_id, kind = event.get("attempt_id"), event.get("type")
    if not isinstance(attempt_id, str) or not isinstance(kind, str):
        return  # not an event
    live = attempts.get(attempt_id)
    if live is None:
        live = attempts[attempt_id] = LiveAttempt(
            attempt_id=attempt_id, task_id=str(event.get("task_id", "")),
            index=attempt_index(attempt_id))
    live.events += 1
    live.last_ts = str(event.get("ts") or live.last_ts)
    if kind == "task_started":
        live.started, live.worker = live.last_ts, str(event.get("worker") or "")
    elif kind == "phase_started":
        live.phase = str(event.get("phase") or "")
    elif kind == "phase_finished" and event.get("ok") is False:
        live.failed_phase = str(event.get("phase") or "")
    elif kind in _STEP_EVENTS and isinstance(event.get("step"), int):
        live.step = int(event["step"])
        if kind == "tool_call_started":
            live.tool = str(event.get("tool") or "")
    elif kind == "task_finished":
        live.finished = True
        live.passed = bool(event.get("passed"))
        live.reason = event.get("failure_reason")


@dataclass
class _Tail:
    inode: int
    offset: int = 0


class LiveRuns:
    """The live state of every run the viewer was asked about (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tails: dict[str, _Tail] = {}
        self._attempts: dict[str, dict[str, LiveAttempt]] = {}

    def status(self, run: Path) -> dict[str, Any]:
        """`live` (part files present), `idle_sec` (since the last write to one), and the
        attempts whose events are known, by attempt id."""
        key = str(run)
        with self._lock:
            folder = open_dir(run, EVENTS_DIR)
            if not isinstance(folder, int):
                self._forget(key)
                return {"live": False, "idle_sec": None, "attempts": {}}
            try:
                newest = self._read_parts(key, folder)
            finally:
                os.close(folder)
            attempts = {a: asdict(v) for a, v in self._attempts.get(key, {}).items()}
        idle = None if newest is None else max(0.0, round(time.time() - newest, 1))
        return {"live": newest is not None, "idle_sec": idle, "attempts": attempts}

    def _forget(self, key: str) -> None:
        self._attempts.pop(key, None)
        for name in [n for n in self._tails if n.startswith(key + "/")]:
            del self._tails[name]

    def _read_parts(self, key: str, folder: int) -> float | None:
        attempts = self._attempts.setdefault(key, {})
        newest: float | None = None
        for name in list_dir(folder):
            if not name.endswith(".jsonl"):
                continue
            with contextlib.suppress(OSError):
                fd = os.open(name, _FILE_FLAGS, dir_fd=folder)
                try:
                    st = os.fstat(fd)
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    newest = max(newest or 0.0, st.st_mtime)
                    self._read_new(f"{key}/{name}", fd, st, attempts)
                finally:
                    os.close(fd)
        return newest

    def _read_new(self, name: str, fd: int, st: os.stat_result,
                  attempts: dict[str, LiveAttempt]) -> None:
        tail = self._tails.get(name)
        if tail is None or tail.inode != st.st_ino or st.st_size < tail.offset:
            tail = self._tails[name] = _Tail(inode=st.st_ino)
        if st.st_size == tail.offset:
            return
        data = os.pread(fd, min(MAX_READ, st.st_size - tail.offset), tail.offset)
        end = data.rfind(b"\n") + 1  # complete lines only: a line being written waits
        if end == 0 and len(data) == MAX_READ:  # one line longer than the cap: skip it
            tail.offset += len(data)
            return
        for line in data[:end].splitlines():
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict):
                    apply_event(attempts, event)
        tail.offset += end
