"""pytest-xdist plumbing that must not import xdist (it is optional at run time): which process
this is, the controller's view of its workers (signal them, the reports they sent that were
never handled), and what a crash report says (the record itself is core/attempt_record.py's).
"""

from __future__ import annotations

import pytest


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def worker_id(config: pytest.Config) -> str:
    return str(config.workerinput["workerid"]) if is_worker(config) else "master"  # type: ignore[attr-defined]


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


def crash_summary(report: pytest.TestReport) -> str:
    """The last line of a crash report: what the record's summary says."""
    return str(report.longrepr).splitlines()[-1][:300] if report.longrepr else "worker crashed"


def crashed_worker(report: pytest.TestReport) -> str:
    """The id of the worker a crash report is about (xdist sets `report.node`)."""
    node = getattr(report, "node", None)
    workerinput = getattr(node, "workerinput", None) or {}
    return str(workerinput.get("workerid") or "worker")


def cap_workers(config: pytest.Config, items: int) -> str | None:
    """Start no more xdist workers than the run has items (`-n 2` with one task started two,
    one of which only collected). Only a `-n N`/`-n auto` count is capped, never `--tx` specs
    the user wrote; xdist reads them when the session starts, after this (pytest_configure).
    Returns a line saying so, or None when nothing changed."""
    tx = getattr(config.option, "tx", None)
    if not config.pluginmanager.hasplugin("xdist") or not config.getoption("numprocesses", None):
        return None
    if not tx or any(spec != "popen" for spec in tx) or len(tx) <= max(items, 1):
        return None
    config.option.tx = ["popen"] * max(items, 1)
    return f"{len(config.option.tx)} xdist worker(s): the run has {items} item(s)"


def default_worksteal(config: pytest.Config) -> None:
    """Task durations vary wildly: steal work unless the user chose a distribution mode."""
    if not config.pluginmanager.hasplugin("xdist") or not config.getoption("numprocesses", None):
        return
    args = config.invocation_params.args
    if not any(a == "-d" or a.startswith("--dist") for a in args):
        config.option.dist = "worksteal"
