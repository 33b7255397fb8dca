"""What a run's exit status says, from the records it wrote (the exit-code table of the README).

pytest's own codes keep their meaning (2 interrupted, 3 internal error, 4 usage error, 5 nothing
collected). Within a run that completed:

- 10 `INFRA_ERROR`: some attempt has no trustworthy result (SANDBOX_ERROR, LLM_ERROR, a crashed
  worker) or a step of the run's end failed. Takes precedence: the pass rate is incomplete.
- 1: the agent fell short. With `--agentbench-fail-under RATE`: the pass rate of scored attempts
  is below RATE (or nothing was scored). Without it: pytest's rule, any FAILED or ERROR item.
- 0 otherwise. With a threshold, task problems (invalid tasks, setups that fail, baselines that
  pass or flake) and quarantined tasks are reported apart and do not fail the run.

Each attempt falls in exactly one category, with the precedence the reports use
(reporting/load.py): quarantined > flaky > invalid > infra > scored.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pytest_agentbench.schemas.taxonomy import FLAKY_REASONS, blame

INFRA_ERROR = 10  # beyond pytest's own codes (0-6; 6 is --max-warnings since pytest 9)


def category(record: dict[str, Any]) -> str:
    """The attempt's category: quarantined, flaky, invalid, infra or scored."""
    result = record.get("result") or {}
    reason = result.get("failure_reason")
    baseline = record.get("baseline_validation") or {}
    if record.get("quarantined"):
        return "quarantined"
    if baseline.get("is_flaky") or reason in FLAKY_REASONS:
        return "flaky"
    who = blame(reason)
    if who == "task":
        return "invalid"
    return "infra" if who == "infra" else "scored"


@dataclass
class Tally:
    """Counts of the records a run wrote, by category, and the scored attempts that passed."""

    categories: Counter[str] = field(default_factory=Counter)
    task_reasons: Counter[str] = field(default_factory=Counter)  # invalid and flaky, by reason
    infra_reasons: Counter[str] = field(default_factory=Counter)
    passed: int = 0
    failed_items: int = 0  # pytest FAILED or ERROR (pytest's rule, for a resumed run)

    def add(self, record: dict[str, Any]) -> None:
        kind = category(record)
        self.categories[kind] += 1
        if record.get("pytest_outcome") in ("failed", "error"):
            self.failed_items += 1
        result = record.get("result") or {}
        reason = str(result.get("failure_reason") or kind.upper())
        if kind == "scored" and result.get("passed"):
            self.passed += 1
        elif kind in ("invalid", "flaky"):
            self.task_reasons[reason] += 1
        elif kind == "infra":
            self.infra_reasons[reason] += 1

    @property
    def scored(self) -> int:
        return self.categories["scored"]

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.scored if self.scored else None


@dataclass(frozen=True)
class AttemptVerdict:
    exit_code: int | None  # None: leave pytest's status as it is
    lines: tuple[str, ...]  # what the terminal summary says about it


def decide(tally: Tally, fail_under: float | None, finish_failed: bool) -> AttemptVerdict:
    """The run's exit status from its tally; `finish_failed`: a step of the run's end failed."""
    lines = [_rate_line(tally)]
    problems = tally.categories["invalid"] + tally.categories["flaky"]
    if problems:
        lines.append(
            f"task problems (not counted against the agent): {problems} attempt(s): "
            + _reasons(tally.task_reasons)
        )
    infra = tally.categories["infra"]
    if infra or finish_failed:
        what = f"{infra} attempt(s) without a result ({_reasons(tally.infra_reasons)})" \
            if infra else "a step of the run's end failed"
        lines.append(f"infrastructure errors: {what}; exit status {INFRA_ERROR}")
        return AttemptVerdict(INFRA_ERROR, tuple(lines))
    if fail_under is None:
        return AttemptVerdict(1 if tally.failed_items else None, tuple(lines))
    rate = tally.pass_rate
    if rate is None or rate < fail_under:
        shown = "nothing scored" if rate is None else f"{rate:.1%}"
        lines.append(f"pass rate {shown} is below --agentbench-fail-under {fail_under:g}: exit 1")
        return AttemptVerdict(1, tuple(lines))
    lines.append(f"pass rate {rate:.1%} meets --agentbench-fail-under {fail_under:g}")
    return AttemptVerdict(0, tuple(lines))


def _rate_line(tally: Tally) -> str:
    rate = tally.pass_rate
    shown = "n/a" if rate is None else f"{rate:.1%}"
    quarantined = tally.categories["quarantined"]
    extra = f", {quarantined} quarantined" if quarantined else ""
    return f"pass rate {shown}: {tally.passed}/{tally.scored} scored attempts passed{extra}"


def _reasons(counts: Counter[str]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))


def nothing_selected(option: str, suites: tuple[str, ...], paths: list[str],
                     deselected: int | None) -> str:
    """Why a run selected no task: a usage error (exit 4), never a silent green run.
    `deselected` None: not known (under xdist the workers deselect)."""
    named = f"{option} {', '.join(suites)}" if option == "--agentbench-suite" else option
    if deselected:
        return (f"{named}: -k/-m (or quarantine) deselected all {deselected} task item(s); "
                "nothing ran")
    if paths:
        shown = " ".join(paths[:3]) + (" ..." if len(paths) > 3 else "")
        return (f"{named}: the paths given ({shown}) hold none of its tasks; run without "
                "paths (the suite's directory is collected), or name a task.yaml or task "
                "directory under it")
    if deselected is None:
        return f"{named}: no task item was left to run (-k/-m or quarantine deselected them all)"
    return f"{named}: no task was collected"
