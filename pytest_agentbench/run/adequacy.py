"""Test adequacy (`agentbench validate-tasks --run --adequacy`): how many small faults in the
oracle's fix do the task's tests catch?

One attempt runs the oracle through the real pipeline (checkout, setup, baseline, the oracle
applied through the tools, scoring). When it passes, each mutant of the oracle patch
(run/mutations.py: faults put back into the lines the fix changes) is graded as a regrade is
(core/regrade.py): a fresh copy of the pre-agent workspace, the mutant patch applied in a fresh
sandbox (hidden tests over it), the passing command with the task's timeout and results check.
Setup and baseline run once per task; each mutant costs a workspace copy, a sandbox and one
passing command.

A mutant the passing command fails on is caught (killed), and so is one it times out on (each
mutant's limit is 5 times the oracle's grading, at least 10 s, at most the task's
tool_timeout_sec); one it passes survived. A mutant that could not be graded (its patch did not
apply, the sandbox failed) counts as neither. The score is caught / (caught + survived), None
when no mutant could be made (an oracle that only deletes a file, or has a single hunk in a file
that is not Python) or graded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest_agentbench.core.regrade as regrade_mod
import pytest_agentbench.core.score_phase as score_phase
from pytest_agentbench.agents.builtin import OracleAgent
from pytest_agentbench.agents.port import AgentOutcome
from pytest_agentbench.core.attempt import Attempt, Failure
from pytest_agentbench.core.attempt_config import SharedAttemptConfig
from pytest_agentbench.core.pipeline import AttemptPipeline
from pytest_agentbench.core.recording import RecordingToolbox
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.run.factory import AttemptFactory
from pytest_agentbench.run.mutations import Mutant, MutationError, mutants
from pytest_agentbench.sandbox.port import ExecResult, Sandbox, SandboxError, SandboxFactory
from pytest_agentbench.schemas.records import Result
from pytest_agentbench.tasks.loader import LoadedTask

DEFAULT_MAX_MUTANTS = 40
DEFAULT_THRESHOLD = 0.6
MAX_FILE_BYTES = 2_000_000
MIN_MUTANT_TIMEOUT_SEC = 10


@dataclass(frozen=True)
class MutantRun:
    """One mutant graded: `caught` True (the tests failed), False (they passed), None (not
    graded: `how` says why)."""

    label: str
    operator: str
    caught: bool | None
    how: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"mutant": self.label, "operator": self.operator, "caught": self.caught,
                "how": self.how, "seconds": round(self.seconds, 2)}


@dataclass(frozen=True)
class Adequacy:
    """A task's adequacy: its score (None: `problem` says why there is none), the mutants
    made (`made`, before `max_mutants` cut), each graded one, and the wall time."""

    score: float | None
    mutants: tuple[MutantRun, ...] = ()
    made: int = 0
    seconds: float = 0.0
    mutant_seconds: float = 0.0
    problem: str = ""
    threshold: float = DEFAULT_THRESHOLD

    @property
    def caught(self) -> int:
        return sum(m.caught is True for m in self.mutants)

    @property
    def survivors(self) -> tuple[MutantRun, ...]:
        return tuple(m for m in self.mutants if m.caught is False)

    @property
    def flagged(self) -> bool:
        return self.score is not None and self.score < self.threshold

    def line(self) -> str:
        """`adequacy 0.75 (6/8 mutants caught, 12.3 s)`, or why there is no score."""
        if self.score is None:
            return f"adequacy n/a ({self.problem})"
        graded = self.caught + len(self.survivors)
        cut = f" of {self.made} made" if self.made > len(self.mutants) else ""
        errors = len(self.mutants) - graded
        ungraded = f", {errors} not graded" if errors else ""
        return (f"adequacy {self.score:.2f} ({self.caught}/{graded} mutants caught{cut}"
                f"{ungraded}, {self.seconds:.1f} s)")

    def warning(self) -> str | None:
        if not self.flagged:
            return None
        shown = "; ".join(m.label for m in self.survivors[:5])
        more = f" (+{len(self.survivors) - 5} more)" if len(self.survivors) > 5 else ""
        return (f"weak tests: adequacy {self.score:.2f} < {self.threshold:.2f}; the tests pass "
                f"with {shown}{more}")

    def to_dict(self) -> dict[str, Any]:
        return {"score": None if self.score is None else round(self.score, 4),
                "caught": self.caught, "survived": len(self.survivors),
                "graded": self.caught + len(self.survivors), "made": self.made,
                "threshold": self.threshold, "flagged": self.flagged,
                "seconds": round(self.seconds, 2),
                "mutant_seconds": round(self.mutant_seconds, 2), "problem": self.problem or None,
                "mutants": [m.to_dict() for m in self.mutants]}


def run_adequacy(task: LoadedTask, shared: SharedAttemptConfig, sandboxes: SandboxFactory,
                 mirrors: MirrorCache, max_mutants: int = DEFAULT_MAX_MUTANTS,
                 threshold: float = DEFAULT_THRESHOLD) -> Adequacy:
    """The oracle attempt with its mutants graded after it (run `<run_id>-adequacy`)."""
    start = time.monotonic()
    per_task = replace(shared, run_id=f"{shared.run_id}-adequacy", variant="adequacy")
    cfg = AttemptFactory(per_task, sandboxes, mirrors, OracleAgent).config(
        task, keep_workspace=False)
    pipeline = MutantPipeline(task, cfg, sandboxes, mirrors, max_mutants)
    record = pipeline.run().to_json_dict()
    result = record.get("result") or {}
    found = pipeline.found
    if found is None:
        why = "the oracle does not pass: " + str(result.get("summary") or "")[:200]
        found = Adequacy(None, problem=why)
    return replace(found, seconds=time.monotonic() - start, threshold=threshold)


class MutantPipeline(AttemptPipeline):
    """The oracle's attempt; after a passing grading, the mutants graded (`found`)."""

    def __init__(self, task: LoadedTask, cfg: Any, sandboxes: SandboxFactory,
                 mirrors: MirrorCache, max_mutants: int) -> None:
        super().__init__(task, cfg, sandboxes, mirrors, OracleAgent())
        self.max_mutants = max_mutants
        self.found: Adequacy | None = None

    def _score(self, sandbox: Sandbox, toolbox: RecordingToolbox) -> Result:
        at = self.at
        base = regrade_mod.keep_base(at)  # the pre-agent state, before scoring changes it
        try:
            result = super()._score(sandbox, toolbox)
            if result.passed:
                with at.timed("adequacy"):
                    self.found = grade_mutants(at, base, self.max_mutants)
                at.environment["adequacy"] = self.found.to_dict()
            return result
        finally:
            regrade_mod.drop_base(base)


def grade_mutants(at: Attempt, base: Path, max_mutants: int) -> Adequacy:
    """Every mutant (at most `max_mutants`, spread over the operators) graded from `base`."""
    text, why = regrade_mod.reference_patch(at)
    if text is None:
        return Adequacy(None, problem=why)
    try:
        made = mutants(text, _pre_fix_files(text, base))
    except MutationError as exc:
        return Adequacy(None, problem=f"no mutants: {exc}")
    if not made:
        return Adequacy(None, problem="no mutant could be made from the oracle patch "
                        "(it only deletes, or changes one hunk of a file that is not Python)")
    start = time.monotonic()
    spec = at.spec
    limit = mutant_timeout(spec.environment.tool_timeout_sec, at.found.timings.get("score", 0))
    at.spec = spec.model_copy(update={"environment": spec.environment.model_copy(
        update={"tool_timeout_sec": limit})})
    try:
        runs = tuple(_grade(at, base, mutant, index)
                     for index, mutant in enumerate(pick(made, max_mutants), 1))
    finally:
        at.spec = spec
    graded = [m for m in runs if m.caught is not None]
    score = sum(m.caught is True for m in graded) / len(graded) if graded else None
    return Adequacy(score, runs, len(made), mutant_seconds=time.monotonic() - start,
                    problem="" if graded else "no mutant could be graded")


def mutant_timeout(task_limit: float, graded_sec: float) -> float:
    """A mutant's passing command gets 5 times the oracle's grading (at least 10 s, at most the
    task's tool_timeout_sec): a mutant that loops forever is caught by its timeout, not after
    the task's whole limit."""
    return float(min(task_limit, max(MIN_MUTANT_TIMEOUT_SEC, round(5 * graded_sec + 1))))


def pick(made: list[Mutant], limit: int) -> list[Mutant]:
    """At most `limit` mutants, taken in turn from each operator's (in the order found)."""
    by_op: dict[str, list[Mutant]] = {}
    for m in made:
        by_op.setdefault(m.operator, []).append(m)
    out: list[Mutant] = []
    while len(out) < min(limit, len(made)):
        for group in by_op.values():
            if group and len(out) < limit:
                out.append(group.pop(0))
    return sorted(out, key=made.index)


def _pre_fix_files(patch: str, base: Path) -> dict[str, str | None]:
    """The pre-fix text of each file the patch changes, read from the pre-agent copy (a regular
    file inside it; anything else reads as absent)."""
    from pytest_agentbench.tools.patch_parse import parse_patch

    out: dict[str, str | None] = {}
    for fp in parse_patch(patch):
        if fp.old_path is None or ".." in Path(fp.old_path).parts:
            continue
        path = base / fp.old_path
        try:
            inside = path.resolve().is_relative_to(base.resolve())
            ok = inside and path.is_file() and not path.is_symlink() and \
                path.stat().st_size <= MAX_FILE_BYTES
            out[fp.old_path] = path.read_text("utf-8") if ok else None
        except (OSError, UnicodeDecodeError):
            out[fp.old_path] = None
    return out


def _grade(at: Attempt, base: Path, mutant: Mutant, index: int) -> MutantRun:
    """One mutant graded as a regrade is, under the grading's own hash seed."""
    outcome = at.found.outcome or AgentOutcome("done")
    name = f"mutant-{index}"

    def once(fresh: Sandbox, log: str, patched: bool) -> tuple[ExecResult, Result]:
        if patched:
            score_phase._apply_diff(at, fresh, f"mutant {index}")
        score_phase._apply_hidden_tests(at, fresh)
        return score_phase._run_scored(at, fresh, outcome, None, log)

    start = time.monotonic()
    try:
        command, verdict, _ = regrade_mod._one(at, base, mutant.patch, 0, once, name)
    except Failure as exc:
        return MutantRun(mutant.label(), mutant.operator, None,
                         f"not graded: {exc.reason}: {exc.summary}"[:300],
                         time.monotonic() - start)
    except SandboxError as exc:
        return MutantRun(mutant.label(), mutant.operator, None,
                         f"not graded: sandbox failed: {exc}"[:300], time.monotonic() - start)
    how = "survived" if verdict.passed else (
        "timed out" if command.timed_out
        else f"{verdict.failure_reason}: {verdict.summary.split('; agent: ')[0]}")
    return MutantRun(mutant.label(), mutant.operator, not verdict.passed, how[:300],
                     time.monotonic() - start)


__all__ = ["Adequacy", "MutantRun", "run_adequacy"]
