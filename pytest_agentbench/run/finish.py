"""The run's end on the controller: keep the last records, merge events, sweep containers,
remove work directories, write report_summary.md, the output root's index.html and
report.html.

The steps are independent: one that fails (the Docker engine gone, a report bug) is reported as
one line and never stops the others.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agentbench.run.engine_pool import EnginePlan
from pytest_agentbench.run.hostenv import work_root
from pytest_agentbench.run.sigterm import run_ending
from pytest_agentbench.run.state import RunState
from pytest_agentbench.run.writer import merge_events

if TYPE_CHECKING:
    from pytest_agentbench.text.redaction import Redactor

SWEEP_TIMEOUT_SEC = 20  # per Docker API call at the end: an engine that stopped answering


def end_run(
    state: RunState, redactor: Redactor, docker: bool, first: Callable[[], None] | None = None,
    engines: list[EnginePlan] | None = None,
) -> list[str]:
    """The controller's end of a run, as independent steps (`first` before the others): one
    that fails costs none of the others. Returns one line per failed step, also kept in
    `report_error.txt`."""
    import pytest_agentbench.reporting as reporting
    from pytest_agentbench.reporting.extra import missing_report_modules, write_reports_notice

    run_ending()
    # without the `reports` extra the run is whole: its summary says how to make the reports
    missing = missing_report_modules()
    gc_hint = "; containers of this run may remain: `agentbench gc` once the engine answers"
    steps: list[tuple[str, Callable[[], Any] | None, str]] = [
        ("keep the records the interrupted workers sent", first, ""),
        ("merge events", lambda: merge_events(state, redactor.redact_record), ""),
        # Containers first: one a killed worker left running still writes into its bind-mounted
        # checkout (a baseline's __pycache__), and removing the tree under it fails (ENOTEMPTY).
        ("sweep containers",
         (lambda: sweep_run(state.run_id, engines, state.session_token)) if docker else None,
         gc_hint),
        ("remove work directories",
         lambda: remove_tree(work_root(state.run_id, state.session_token)), ""),
        ("write report_summary.md",
         (lambda: write_reports_notice(state.path, missing)) if missing else
         (lambda: reporting.write_summary(state.path, redactor=redactor)), ""),
        # report.html first (linking to the index about to be written), so the index never
        # lists this run without its page; both atomic.
        ("write report.html", None if missing else
         lambda: reporting.write_html(state.path, redactor=redactor, link_index=True), ""),
        ("write the runs index", None if missing else lambda: write_runs_index(state.path), ""),
    ]
    errors = []
    for what, step, hint in steps:
        try:
            if step is not None:
                step()
        except Exception as exc:  # noqa: BLE001 - one failed step must not cost the others
            text = " ".join(str(exc).split())[:300]
            errors.append(redactor.redact(f"{what}: {type(exc).__name__}: {text}{hint}"))
    if errors:
        with contextlib.suppress(OSError):
            (state.path / "report_error.txt").write_text("".join(f"{e}\n" for e in errors), "utf-8")
    return errors


def write_runs_index(run_dir: Path) -> Path:
    """`<output root>/index.html`, the list of every run there (reporting/html/index.py)."""
    from pytest_agentbench.reporting.html.index import write_index

    return write_index(run_dir.resolve().parent)


def sweep_run(run_id: str, engines: list[EnginePlan] | None = None, session: str = "") -> int:
    """Remove every container (and volume) of the run, by label, on each of the run's engines,
    waiting at most SWEEP_TIMEOUT_SEC per call; with `session`, not another live session's (the
    same run name in another project at once). An engine that does not answer is named in the
    error raised after the others were swept."""
    import docker

    from pytest_agentbench.sandbox.docker.engines import connect, parse_engine
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    removed, problems = 0, []
    for plan in engines or [EnginePlan("default", "default", None, "bind")]:
        try:
            if plan.endpoint == "default" and plan.transfer == "bind":
                client = docker.from_env(timeout=SWEEP_TIMEOUT_SEC)
            else:
                client = connect(parse_engine(plan.spec_text()), timeout=SWEEP_TIMEOUT_SEC)
            try:
                factory = DockerSandboxFactory(client, transfer=plan.transfer, engine=plan.name)
                removed += factory.sweep({"agentbench.run_id": run_id}, session=session)
            finally:
                client.close()
        except Exception as exc:  # noqa: BLE001 - the other engines are still swept
            problems.append(f"engine {plan.name}: {' '.join(str(exc).split())[:200]}")
    DockerSandboxFactory.release_stale_mounts()  # a killed worker's, before its work dir goes
    if problems:
        raise RuntimeError("; ".join(problems))
    return removed


def remove_tree(path: Path, tries: int = 3, pause_sec: float = 0.5) -> None:
    """Remove `path`; a process that still writes into it (an orphaned git of a killed worker)
    gets `tries` chances to finish before the last error is raised."""
    for attempt in range(1, tries + 1):
        if not path.exists():
            return
        try:
            shutil.rmtree(path)
            return
        except OSError:
            if attempt == tries:
                raise
            time.sleep(pause_sec)
