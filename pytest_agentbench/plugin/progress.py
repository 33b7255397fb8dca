"""Live progress of the attempts while they run: which phase (prepare, setup, baseline, agent,
score) and which agent step, as pytest's verbosity asks.

- default verbosity: nothing beyond what pytest prints;
- `-v`: a line when an attempt enters a phase (and when a phase fails);
- `-vv`: also a line for each of the agent's tool calls (its step number and tool);
- every such line is also a record of the `pytest_agentbench.progress` logger at INFO, so
  `--log-cli-level=INFO` shows them as live log records (then the plain lines are left out).

Where the lines come from: the pipeline's own events (core/event_sink.py), never new calls in core.
In one process the attempt's EventSink calls `listener` (AttemptConfig.event_listener) as it writes
each event. Under xdist a worker's output is never shown live, but every worker already appends
its events to `events/<session>-<worker>.jsonl` in the run directory: a controller thread tails
those files and hands the lines to xdist's own event queue, so the controller's main thread (the
one that prints test results) writes them between two results, never in the middle of one.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agentbench.plugin.workers import is_worker

if TYPE_CHECKING:
    from pytest_agentbench.plugin.agentbench_plugin import AgentbenchPlugin

PLUGIN_NAME = "agentbench-progress"
LOGGER = logging.getLogger("pytest_agentbench.progress")
POLL_SEC = 0.5  # how often the xdist controller looks at the workers' event files
QUEUE_EVENT = "agentbench_progress"  # xdist's controller calls DSession.worker_<this>(**kwargs)


def describe(event: dict[str, Any], attempts: int) -> tuple[int, str] | None:
    """The verbosity an event needs to be shown and its text, or None for an event not shown."""
    kind = event.get("type")
    if kind == "phase_started":
        level, what = 1, str(event.get("phase"))
    elif kind == "phase_finished" and not event.get("ok", True):
        level, what = 1, f"{event.get('phase')} failed"
    elif kind == "tool_call_started":
        level, what = 2, f"agent step {event.get('step')}: {event.get('tool')}"
    else:
        return None
    name = str(event.get("task_id"))
    if attempts > 1:
        index = str(event.get("attempt_id", "")).split("@")[0].rpartition(":")[2]
        name += f" attempt {int(index) + 1}" if index.isdigit() else ""
    mono_ms = event.get("mono_ms")
    seconds = mono_ms / 1000 if isinstance(mono_ms, int | float) else 0.0
    return level, f"{name}: {what} (+{seconds:.1f}s)"


class Progress:
    """The progress display of one pytest process (registered as "agentbench-progress")."""

    def __init__(self, config: pytest.Config, run: AgentbenchPlugin) -> None:
        self.config, self.run = config, run
        self.attempts = run.settings.attempts
        self.verbosity = config.get_verbosity()
        self.live_log = _live_log_level(config) <= logging.INFO  # records shown: no plain lines
        self.lock = threading.Lock()
        self.finished: set[str] = set()  # attempt ids whose result was shown (xdist controller)
        self._tail: EventTail | None = None

    # -- what is shown ---------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.verbosity >= 1 or self.live_log

    def show(self, event: dict[str, Any], worker: str | None = None) -> None:
        described = describe(event, self.attempts)
        if described is None:
            return
        level, text = described
        prefix = f"[{worker}] " if worker else ""
        if LOGGER.isEnabledFor(logging.INFO):
            LOGGER.info("%s%s", prefix, text)
        if self.live_log or level > self.verbosity:
            return
        self.write(f"agentbench {prefix}{text}")

    def write(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        with self.lock:
            if capture is not None:  # an attempt runs inside fixture setup, under capture
                with capture.global_and_fixture_disabled():
                    reporter.write_line(line)
            else:
                reporter.write_line(line)

    def listener(self) -> Callable[[dict[str, Any]], None] | None:
        """The EventSink listener of an attempt run in this process; None on an xdist worker
        (its output is not shown: the controller tails its event file) or when nothing shows."""
        if is_worker(self.config) or not self.active:
            return None
        return self.show

    # -- the xdist controller ----------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        self._tail = self._start_tail()
        try:
            return (yield)
        finally:
            if self._tail is not None:
                self._tail.stop()
                self._tail = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = getattr(report, "agentbench", None)
        if isinstance(record, dict) and self._tail is not None:
            self.finished.add(str(record.get("attempt_id")))

    def _start_tail(self) -> EventTail | None:
        """Tail the workers' event files when this is an xdist controller with workers and
        something is to be shown; xdist's queue carries the lines to the main thread."""
        dsession = self.config.pluginmanager.get_plugin("dsession")
        queue = getattr(dsession, "queue", None)
        state = self.run.state
        if not self.active or queue is None or state is None or is_worker(self.config):
            return None

        def shown(lines: list[tuple[str, dict[str, Any]]]) -> None:  # the main thread's
            for worker, event in lines:
                try:
                    if str(event.get("attempt_id")) not in self.finished:
                        self.show(event, worker)
                except Exception:  # noqa: BLE001 - a progress line never stops the run
                    continue

        setattr(dsession, f"worker_{QUEUE_EVENT}", shown)  # noqa: B010 - xdist looks it up so
        tail = EventTail(
            state.path / "events",
            f"{state.session_token}-",
            lambda lines: queue.put((QUEUE_EVENT, {"lines": lines})),
        )
        tail.start()
        return tail


class EventTail:
    """Reads the lines appended to `<directory>/<prefix><worker>.jsonl` every POLL_SEC in a
    daemon thread and passes the events worth showing, with their worker, to `deliver`."""

    def __init__(
        self,
        directory: Path,
        prefix: str,
        deliver: Callable[[list[tuple[str, dict[str, Any]]]], None],
    ) -> None:
        self.directory, self.prefix, self.deliver = directory, prefix, deliver
        self.offsets: dict[Path, int] = {}
        self.partial: dict[Path, bytes] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="agentbench-progress", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)

    def _run(self) -> None:
        while not self.stopping.wait(POLL_SEC):
            try:
                lines = self.poll()
                if lines:
                    self.deliver(lines)
            except Exception:  # noqa: BLE001 - merged away, unreadable, odd: try again next time
                continue

    def poll(self) -> list[tuple[str, dict[str, Any]]]:
        """The new events of every worker's file since the last poll (complete lines only)."""
        found: list[tuple[str, dict[str, Any]]] = []
        for path in sorted(self.directory.glob(f"{self.prefix}*.jsonl")):
            worker = path.name[len(self.prefix) : -len(".jsonl")]
            with path.open("rb") as handle:
                handle.seek(self.offsets.get(path, 0))
                data = handle.read()
            if not data:
                continue
            self.offsets[path] = self.offsets.get(path, 0) + len(data)
            data = self.partial.pop(path, b"") + data
            *complete, rest = data.split(b"\n")
            if rest:
                self.partial[path] = rest
            for line in complete:
                event = _parse(line)
                if event is not None and describe(event, 1) is not None:
                    found.append((worker, event))
        return found


def _live_log_level(config: pytest.Config) -> int:
    """The level of pytest's live logging (`--log-cli-level`, or the `log_cli` ini with
    `log_cli_level`/`log_level`); above CRITICAL when live logging is off."""
    level = config.getoption("log_cli_level", None)
    if level is None and not config.getini("log_cli"):
        return logging.CRITICAL + 1
    for name in (level, config.getini("log_cli_level"), config.getoption("log_level", None),
                 config.getini("log_level")):
        if name:
            text = str(name).strip().upper()
            value = int(text) if text.isdigit() else logging.getLevelName(text)
            return value if isinstance(value, int) else logging.WARNING
    return logging.WARNING  # live logging without a level: the root logger's default


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:  # a torn line a crashed worker left; the run's end sets it aside
        return None
    return event if isinstance(event, dict) else None
