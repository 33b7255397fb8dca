"""How pytest's reports become attempt records: the pytest outcome a task item's record
carries (attached to the item's report as `report.agentbench`), and the INFRA_ERROR record
of an attempt whose xdist worker died in it (the record itself is core/attempt_record.py's).
The plugin object (plugin/agentbench_plugin.py) writes both to attempts.jsonl.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_agentbench.core.attempt_record import crash_record
from pytest_agentbench.plugin.items import SHORT_FAILURES
from pytest_agentbench.plugin.workers import crash_summary, crashed_worker
from pytest_agentbench.run.settings import RunSettings
from pytest_agentbench.run.state import RunState
from pytest_agentbench.tasks.loader import LoadedTask


def pytest_outcome(report: pytest.TestReport) -> str:
    """What pytest made of a task item, as its record says it: passed, failed, skipped, error
    (setup did not pass), xfailed or xpassed (a quarantined task run under xfail)."""
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.when == "setup":
        return "skipped" if report.skipped else "error"
    return report.outcome


def attach_record(
    item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport
) -> None:
    """Shorten a task's own failure to its text, and attach the item's record, with its pytest
    outcome, to the one report that settles it (the call, or a setup that did not pass)."""
    if call.excinfo is not None and isinstance(call.excinfo.value, SHORT_FAILURES):
        report.longrepr = str(call.excinfo.value)  # one short text, no traceback
    record = getattr(item, "agentbench_record", None)
    if record is None or getattr(item, "_agentbench_attached", False):
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        record["pytest_outcome"] = pytest_outcome(report)
        report.agentbench = record  # type: ignore[attr-defined]
        item._agentbench_attached = True  # type: ignore[attr-defined]


def worker_crash_record(
    state: RunState, settings: RunSettings, attempt: tuple[LoadedTask, int],
    report: pytest.TestReport,
) -> dict[str, Any]:
    """The INFRA_ERROR record of `attempt` (its task and index), whose worker died mid-item."""
    task, index = attempt
    return crash_record(
        run_id=state.run_id,
        session_token=state.session_token,
        spec=task.spec,
        variant=settings.variant.name,
        variant_config_hash=settings.variant_hash(),
        attempt_index=index,
        worker=crashed_worker(report),
        summary=crash_summary(report),
    ).to_json_dict()
