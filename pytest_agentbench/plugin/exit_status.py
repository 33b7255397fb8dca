"""The run's exit status, set at the session's end from what collection selected and what the
records say (run/verdict.py has the rules and the README's table)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_agentbench.run.settings import RunSettings
from pytest_agentbench.run.state import RunState, discard_empty_run, point_latest
from pytest_agentbench.run.verdict import decide, nothing_selected
from pytest_agentbench.run.writer import AttemptLog


@dataclass
class Selection:
    """Task items left to run once collection settled (None: not known, e.g. a collection
    error), those -k/-m/quarantine deselected, those a resumed run had already recorded, and
    the failed reports of items that are no task (a project's own tests run beside a suite)."""

    selected: int | None = None
    deselected: int | None = 0  # None: some were, but the workers did it (under xdist)
    already_done: int = 0
    other_failures: int = 0


def settle_exit(
    session: pytest.Session,
    log: AttemptLog,
    state: RunState,
    settings: RunSettings,
    selection: Selection,
    finish_failed: bool,
) -> list[str]:
    """Set `session.exitstatus` where pytest's own says the session ran to its end (0, 1 or 5)
    and point `latest` at the run; returns the terminal summary's lines about it. The status of
    a resumed run is that of the whole run. A new run that selected nothing is a usage error and
    leaves no directory."""
    status = int(session.exitstatus)
    if status not in (0, 1, 5):  # interrupted, internal or usage error: pytest's word stands
        if log.recorded == 0 and discard_empty_run(state):
            return [f"(no attempt began: no run directory kept at {state.path})"]
        return []
    lines: list[str] = []
    if log.recorded == 0 and not selection.selected:
        if not (selection.already_done and not selection.deselected):
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return _nothing_selected(session, state, settings, selection)
        lines.append(f"nothing left to run: all {selection.already_done} attempt(s) of this run "
                     "are recorded")
        session.exitstatus = pytest.ExitCode.OK
    verdict = decide(log.tally, settings.fail_under, finish_failed)
    lines += verdict.lines
    code = verdict.exit_code
    if selection.other_failures and code in (None, 0):
        lines.append(f"{selection.other_failures} test(s) outside the suite failed: exit 1")
        code = 1
    if code is not None:
        session.exitstatus = code
    note = point_latest(state.path)
    if note:
        state.notes.append(note)
    return lines


def _nothing_selected(
    session: pytest.Session, state: RunState, settings: RunSettings, selection: Selection
) -> list[str]:
    config = session.config
    given = config.args_source == pytest.Config.ArgsSource.ARGS
    option = "--agentbench-suite" if config.getoption("agentbench_suite") else \
        "--agentbench-resume"
    why = nothing_selected(option, settings.suites, list(config.args) if given else [],
                           selection.deselected)
    lines = [f"ERROR: {why}"]
    if discard_empty_run(state):
        lines.append(f"(no run directory kept: {state.path})")
    return lines


def recorded_line(log: AttemptLog) -> str:
    """How many attempts this session recorded, by outcome; after a resume also how many the run
    holds, the count the pass rate beside it is over ("2 attempts recorded" beside "4/4 scored
    attempts passed" read as a contradiction)."""
    counts = ", ".join(f"{n} {k}" for k, n in sorted(log.outcomes.items())) or "none"
    noun = "attempt" if log.recorded == 1 else "attempts"
    in_run = sum(log.tally.categories.values())
    if in_run == log.recorded:
        return f"{log.recorded} {noun} recorded ({counts})"
    return f"{log.recorded} {noun} recorded in this session ({counts}), {in_run} in the run"

