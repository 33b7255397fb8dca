"""pytest-xdist plumbing that must not import xdist (it is optional at run time): which process
this is, the controller's view of its workers (signal them, the reports they sent that were
never handled), and the record of an attempt whose worker died.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_agentbench.core.events import utc_now
from pytest_agentbench.core.trial import attempt_id
from pytest_agentbench.core.trial_record import limits_of
from pytest_agentbench.schemas.records import AttemptRecord, Result, Timestamps
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.tasks.loader import LoadedTask
from pytest_agentbench.version import harness_version


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def worker_id(config: pytest.Config) -> str:
    return str(config.workerinput["workerid"]) if is_worker(config) else "master"  # type: ignore[attr-defined]


def crash_record(
    report: pytest.TestReport,
    *,
    run_id: str,
    session_token: str,
    task: LoadedTask,
    attempt_index: int,
    variant: str,
    variant_config_hash: str,
) -> dict[str, Any]:
    """A worker died mid-attempt (xdist's report with when="???"): record it as SANDBOX_ERROR
    rather than leave a silent gap."""
    now = utc_now()
    spec = task.spec
    record = AttemptRecord(
        run_id=run_id,
        attempt_id=attempt_id(run_id, spec.id, variant, attempt_index, session_token),
        task_id=spec.id,
        suite=spec.suite,
        variant=variant,
        variant_config_hash=variant_config_hash,
        attempt_index=attempt_index,
        task_spec_version=spec.task_spec_version,
        task_commit=spec.repo.commit,
        harness_version=harness_version(),
        worker=_worker_name(report),
        timestamps=Timestamps(started_at=now, ended_at=now),
        duration_sec=0.0,
        result=Result(
            passed=False,
            failure_reason=Reason.SANDBOX_ERROR,
            sub_reason="WORKER_CRASH",
            summary=_crash_summary(report),
        ),
        limits=limits_of(spec),
        pytest_outcome="error",
    )
    return record.to_json_dict()


def is_crash_report(report: pytest.TestReport) -> bool:
    """pytest-xdist reports a worker that died mid-item with when="???"."""
    return report.failed and report.when not in ("setup", "call", "teardown")


def signal_workers(config: pytest.Config, signum: int) -> list[int]:
    """Send `signum` to the xdist worker processes of this controller (the pids of execnet's
    popen gateways); returns the pids signalled. What a terminal's Ctrl-C does to the whole
    process group, for a SIGTERM that reached the controller alone."""
    import os

    group = getattr(getattr(config.pluginmanager.getplugin("dsession"), "nodemanager", None),
                    "group", None)
    pids = []
    for gateway in list(group or []):
        pid = getattr(getattr(getattr(gateway, "_io", None), "popen", None), "pid", None)
        if isinstance(pid, int):
            try:
                os.kill(pid, signum)
                pids.append(pid)
            except ProcessLookupError:
                pass
    return pids


def unhandled_reports(config: pytest.Config) -> list[pytest.TestReport]:
    """Test reports the workers sent that the controller never handled: an interrupted run
    (Ctrl-C, SIGTERM) stops xdist's event loop with events still queued. Call after the nodes
    were torn down; the attempts they describe finished and deserve their records."""
    from queue import Empty

    queue = getattr(config.pluginmanager.getplugin("dsession"), "queue", None)
    reports: list[pytest.TestReport] = []
    while queue is not None:
        try:
            callname, kwargs = queue.get_nowait()
        except Empty:
            break
        if callname == "testreport" and "rep" in kwargs:
            kwargs["rep"].node = kwargs.get("node")
            reports.append(kwargs["rep"])
    return reports


def _crash_summary(report: pytest.TestReport) -> str:
    return str(report.longrepr).splitlines()[-1][:300] if report.longrepr else "worker crashed"


def _worker_name(report: pytest.TestReport) -> str:
    node = getattr(report, "node", None)
    workerinput = getattr(node, "workerinput", None) or {}
    return str(workerinput.get("workerid") or "worker")
