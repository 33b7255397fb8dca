"""pytest-xdist plumbing that must not import xdist (it is optional at run time)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_agentbench.core.events import utc_now
from pytest_agentbench.core.trial import attempt_id
from pytest_agentbench.core.trial_record import limits_of
from pytest_agentbench.schemas.records import AttemptRecord, Result, Timestamps
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.version import harness_version

if TYPE_CHECKING:
    from pytest_agentbench.plugin.active import AgentbenchConfig


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def worker_id(config: pytest.Config) -> str:
    return str(config.workerinput["workerid"]) if is_worker(config) else "master"  # type: ignore[attr-defined]


def crash_record(ab: AgentbenchConfig, report: pytest.TestReport) -> dict[str, Any] | None:
    """A worker died mid-attempt: record it as SANDBOX_ERROR rather than leave a silent gap."""
    path_part, _, name = report.nodeid.partition("::")
    loaded = next(
        (t for p, t in ab.tasks_by_path.items() if p.as_posix().endswith(path_part)), None
    )
    if loaded is None or ab.state is None:
        return None
    index = 0
    if "-attempt" in name:
        index = int(name.rsplit("-attempt", 1)[1].rstrip("]")) - 1
    now = utc_now()
    record = AttemptRecord(
        run_id=ab.state.run_id,
        attempt_id=attempt_id(
            ab.state.run_id, loaded.id, ab.variant.name, index, ab.state.session_token
        ),
        task_id=loaded.id,
        suite=loaded.spec.suite,
        variant=ab.variant.name,
        variant_config_hash=ab.variant_hash(),
        attempt_index=index,
        task_spec_version=loaded.spec.task_spec_version,
        task_commit=loaded.spec.repo.commit,
        harness_version=harness_version(),
        worker=_worker_name(report),
        timestamps=Timestamps(started_at=now, ended_at=now),
        duration_sec=0.0,
        result=Result(
            passed=False,
            failure_reason=Reason.SANDBOX_ERROR,
            sub_reason="WORKER_CRASH",
            summary=str(report.longrepr).splitlines()[-1][:300]
            if report.longrepr
            else "worker crashed",
        ),
        limits=limits_of(loaded.spec),
        pytest_outcome="error",
    )
    return record.to_json_dict()


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


def _worker_name(report: pytest.TestReport) -> str:
    node = getattr(report, "node", None)
    workerinput = getattr(node, "workerinput", None) or {}
    return str(workerinput.get("workerid") or "worker")
