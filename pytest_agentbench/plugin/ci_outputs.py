"""What CI tools read about each attempt, in pytest's own outputs (registered as
"agentbench-ci" on every process of a run):

- junit XML: each task item's `<testcase>` gets `<properties>` (`agentbench.run_id`,
  `agentbench.run_dir`, `agentbench.attempt_id`, `agentbench.reason`, `agentbench.sub_reason`,
  `agentbench.artifacts`, `agentbench.duration_sec`, `agentbench.duration.<phase>`), put on the
  item's `user_properties` so that they travel with the reports from xdist workers;
- pytest-json-report: each test's `metadata` holds `{"agentbench": {...}}` with the same facts
  (its `pytest_json_runtest_metadata` hook, so they travel in the report too);
- `--durations`: the attempt runs in the `agentbench_attempt` fixture, so pytest would book all of
  it as "setup"; the setup report keeps the phases before the agent (prepare, setup, baseline)
  and the call report gets the agent's and scoring's time, the total unchanged;
- the path of the run's report.html, printed at the end as pytest-html prints its own.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_agentbench.plugin.agentbench_plugin import AgentbenchPlugin

PLUGIN_NAME = "agentbench-ci"
PHASES = ("prepare", "setup", "baseline", "agent", "score")
CALL_PHASES = ("agent", "score")  # booked as the test's "call"; the others stay in "setup"
HTML_FILE = "report.html"  # reporting/html/run_page.py's HTML_FILE, written by run/finish.py


def attempt_facts(record: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """The harness data of one attempt record as CI outputs carry it: ids, reason code,
    absolute artifact path, duration in total and per phase (seconds)."""
    result = record.get("result") or {}
    reason = result.get("failure_reason") or ("PASSED" if result.get("passed") else "FAILED")
    task_dir = (record.get("artifact_paths") or {}).get("task_dir")
    timings = record.get("timings") or {}
    return {
        "run_id": record.get("run_id"),
        "run_dir": str(run_dir),
        "attempt_id": record.get("attempt_id"),
        "reason": reason,
        "sub_reason": result.get("sub_reason") or "",
        "artifacts": str(run_dir / task_dir) if task_dir else "",
        "duration_sec": record.get("duration_sec"),
        "phase_durations": {p: timings[p] for p in PHASES if p in timings},
    }


def junit_properties(facts: dict[str, Any]) -> list[tuple[str, object]]:
    """`facts` flattened to (name, value) pairs, each name prefixed `agentbench.`."""
    pairs: list[tuple[str, object]] = [
        (f"agentbench.{key}", value)
        for key, value in facts.items()
        if key != "phase_durations" and value is not None
    ]
    pairs += [(f"agentbench.duration.{p}", s) for p, s in facts["phase_durations"].items()]
    return pairs


def call_seconds(record: dict[str, Any]) -> float:
    timings = record.get("timings") or {}
    return float(sum(timings.get(p, 0.0) for p in CALL_PHASES))


class CiOutputs:
    def __init__(self, run: AgentbenchPlugin) -> None:
        self.run = run
        self.started = time.time()

    def _run_dir(self) -> Path | None:
        state = self.run.state
        return Path(state.run_dir).absolute() if state is not None else None

    def _facts(self, item: pytest.Item) -> dict[str, Any] | None:
        record = getattr(item, "agentbench_record", None)
        run_dir = self._run_dir()
        if not isinstance(record, dict) or run_dir is None:
            return None
        return attempt_facts(record, run_dir)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        if call.when != "teardown" and not hasattr(item, "_agentbench_ci"):
            facts = self._facts(item)
            if facts is not None:  # before the report is made: it and the later ones carry them
                item.user_properties.extend(junit_properties(facts))
                item._agentbench_ci = facts  # type: ignore[attr-defined]
        report = yield
        record = getattr(item, "agentbench_record", None)
        if isinstance(record, dict):
            _rebook_duration(item, report, record)
        return report

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_runtest_metadata(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> dict[str, Any] | None:
        """pytest-json-report's hook: merged into the test's `metadata`."""
        facts = getattr(item, "_agentbench_ci", None)
        return {"agentbench": facts} if facts else None

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        run_dir = self._run_dir()
        if run_dir is None or self.run.log is None:  # a worker, or no run began
            return
        html = run_dir / HTML_FILE
        try:
            fresh = html.stat().st_mtime >= self.started - 1
        except OSError:
            return
        if fresh:
            terminalreporter.write_sep("-", f"Generated agentbench html report: {html.as_uri()}")


def _rebook_duration(item: pytest.Item, report: pytest.TestReport, record: dict[str, Any]) -> None:
    """Move the agent's and scoring's time from the setup report to the call report (only when
    a call follows: an attempt that ERRORs at setup keeps all of its time there)."""
    if report.when == "setup" and report.passed:
        moved = min(call_seconds(record), report.duration)
        report.duration -= moved
        item._agentbench_moved = moved  # type: ignore[attr-defined]
    elif report.when == "call":
        report.duration += getattr(item, "_agentbench_moved", 0.0)
