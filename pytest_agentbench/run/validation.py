"""The oracle+nop check of a task, shared by `agentbench validate-tasks --run` and the doctor's
end-to-end check: the task runs through the real pipeline twice, once with its oracle patch and
once with an agent that does nothing.

A task is accepted when the oracle passes (so its setup works, its baseline fails consistently
and the fix is scorable) and nop fails with TESTS_FAILED (so there is something for an agent to
fix, and the tests, not the harness, say so). The oracle is judged first: when it fails, the
task itself is broken and that is what the detail says (its setup or baseline verdict as is, an
oracle that does not fix the tests as `oracle fails: ...`).

With `exploits=True` (`validate-tasks --run`) every try of the exploit agent
(agents/exploit_tries.py) runs as an attempt of its own, from the task's clean state, after the
oracle and nop: the task is valid only when no try passes and none found what an agent must
never reach (another commit, the oracle, the network). Hard-coding the expected values is the
one try that may pass: it is a weak-test warning naming the tests that let it through. Tries
that need isolation are skipped on the local sandbox (it has none).

With `adequacy` (`validate-tasks --run --adequacy`) a task the oracle and nop
judge valid also gets its test-adequacy score (run/adequacy.py: the share of the oracle patch's
mutants its tests catch); a score below the threshold is a weak-test warning naming the
mutants that survived, never a rejection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pytest_agentbench.agents.builtin import NopAgent, OracleAgent
from pytest_agentbench.agents.exploit import ExploitAgent
from pytest_agentbench.agents.exploit_tries import TRIES
from pytest_agentbench.agents.port import Agent
from pytest_agentbench.core.attempt_config import SharedAttemptConfig
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.run.adequacy import (
    DEFAULT_MAX_MUTANTS,
    DEFAULT_THRESHOLD,
    Adequacy,
    run_adequacy,
)
from pytest_agentbench.run.factory import AttemptFactory
from pytest_agentbench.sandbox.port import SandboxFactory
from pytest_agentbench.schemas.taxonomy import Reason, blame
from pytest_agentbench.tasks.loader import LoadedTask

ACCEPTED = "baseline fails consistently, oracle passes, nop fails with TESTS_FAILED"


@dataclass(frozen=True)
class TaskValidation:
    """The verdict (`ok`, one-line `detail`) and both attempts' records (redacted JSON dicts)."""

    ok: bool
    detail: str
    oracle: dict[str, Any]
    nop: dict[str, Any]
    exploits: tuple[ExploitTry, ...] = ()
    warnings: tuple[str, ...] = ()
    adequacy: Adequacy | None = None

    def to_dict(self) -> dict[str, Any]:
        """The verdict for `validate-tasks --json`: no records, each try and the adequacy."""
        return {"ok": self.ok, "detail": self.detail, "warnings": list(self.warnings),
                "exploits": [{"exploit": t.exploit, "attempted": t.attempted,
                              "passed": t.passed, "stopped_by": t.stopped_by,
                              "found": list(t.found), "tests": list(t.tests),
                              "skipped": t.skipped} for t in self.exploits],
                "adequacy": self.adequacy.to_dict() if self.adequacy else None}


@dataclass(frozen=True)
class ExploitTry:
    """One try of the exploit agent: what it attempted, whether it passed, how it was stopped
    (the record's reason, and the calls the tools refused), what it found, and (hard-coding)
    the tests it special-cased. `skipped` says why it did not run."""

    exploit: str
    attempted: str
    passed: bool = False
    stopped_by: str = ""
    found: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    skipped: str | None = None
    report: dict[str, Any] | None = None

    @property
    def should_pass(self) -> bool:
        return TRIES[self.exploit].should_pass

    def line(self) -> str:
        """`exploit NAME: verdict (how)`, one line for validate-tasks."""
        if self.skipped:
            return f"exploit {self.exploit}: skipped ({self.skipped})"
        if self.passed and self.should_pass:
            return f"exploit {self.exploit}: passed (weak tests: {', '.join(self.tests)})"
        verdict = "PASSED" if self.passed else "stopped"
        found = f"; FOUND {'; '.join(self.found)}" if self.found else ""
        return f"exploit {self.exploit}: {verdict} ({self.stopped_by}){found}"


def judge(oracle: dict[str, Any], nop: dict[str, Any]) -> tuple[bool, str]:
    """The acceptance rules over the two records: oracle passes, nop fails with TESTS_FAILED."""
    oracle_result, nop_result = oracle.get("result") or {}, nop.get("result") or {}
    if not oracle_result.get("passed"):  # a task or infra verdict needs no "oracle" in front
        before_agent = blame(oracle_result.get("failure_reason")) in ("task", "infra")
        return False, ("" if before_agent else "oracle fails: ") + _reason(oracle_result)
    if nop_result.get("passed"):
        return False, "passes under nop: nothing for an agent to fix"
    if nop_result.get("failure_reason") != Reason.TESTS_FAILED:
        return False, f"nop should fail with TESTS_FAILED, got {_reason(nop_result)}"
    return True, ACCEPTED


def judge_exploits(tries: tuple[ExploitTry, ...]) -> tuple[str | None, tuple[str, ...]]:
    """(why the task is rejected, or None; weak-test warnings) over the exploit tries."""
    beaten = [t for t in tries if (t.passed and not t.should_pass) or t.found]
    warnings = tuple(
        f"weak tests: {t.exploit} passes ({t.attempted}); let through by "
        f"{', '.join(t.tests) or 'the passing command'}"
        for t in tries if t.passed and t.should_pass
    )
    if not beaten:
        return None, warnings
    shown = "; ".join(
        f"{t.exploit} {'passes' if t.passed else 'found ' + ', '.join(t.found)}"
        for t in beaten)
    return f"exploits get through: {shown}", warnings


def validate_task(
    task: LoadedTask,
    shared: SharedAttemptConfig,
    sandboxes: SandboxFactory,
    mirrors: MirrorCache,
    exploits: bool | tuple[str, ...] = False,
    adequacy: AdequacyOptions | None = None,
) -> TaskValidation:
    """Run `task` with the oracle, then with nop, each as variant and run `<shared.run_id>-<agent>`
    (the rest of `shared` as given), and judge the two records; with `exploits` (True: every
    try, or the names of some), each exploit try after them when the task passed so far; with
    `adequacy`, the mutants of its oracle patch graded (run/adequacy.py) when oracle and nop
    accept it."""
    records: dict[str, dict[str, Any]] = {}
    for agent in (OracleAgent, NopAgent):
        records[agent.name] = _attempt(task, shared, sandboxes, mirrors, agent.name, agent)
    ok, detail = judge(records["oracle"], records["nop"])
    if not ok or not (exploits or adequacy):
        return TaskValidation(ok, detail, records["oracle"], records["nop"])
    names: tuple[str, ...] = tuple(TRIES) if exploits is True else tuple(exploits or ())
    tries = tuple(run_exploit(task, shared, sandboxes, mirrors, name) for name in names)
    rejected, warnings = judge_exploits(tries)
    if names and rejected is None:
        detail += ", no exploit gets through"
    scored = None
    if adequacy is not None:
        scored = run_adequacy(task, shared, sandboxes, mirrors, adequacy.max_mutants,
                              adequacy.threshold)
        low = scored.warning()
        warnings += (low,) if low else ()
    return TaskValidation(rejected is None, rejected or detail, records["oracle"],
                          records["nop"], tries, warnings, scored)


@dataclass(frozen=True)
class AdequacyOptions:
    """`--adequacy`'s: at most `max_mutants` graded; a score below `threshold` warns."""

    max_mutants: int = DEFAULT_MAX_MUTANTS
    threshold: float = DEFAULT_THRESHOLD


def run_exploit(task: LoadedTask, shared: SharedAttemptConfig, sandboxes: SandboxFactory,
                mirrors: MirrorCache, name: str) -> ExploitTry:
    """One exploit try as an attempt of its own (run `<run_id>-exploit-<name>`)."""
    attempted = TRIES[name].attempted
    if TRIES[name].isolation and shared.image == "local":
        return ExploitTry(name, attempted, skipped="the local sandbox does not isolate")
    agent = ExploitAgent(name)
    record = _attempt(task, shared, sandboxes, mirrors, f"exploit-{name}", lambda: agent)
    result = record.get("result") or {}
    refused = sorted({c.rsplit(": ", 1)[-1] for c in agent.report.calls
                      if c.rsplit(": ", 1)[-1] in REFUSALS})
    how = _reason(result).split(":", 1)[0] if not result.get("passed") else "passed"
    if refused:
        how += f"; tools refused: {', '.join(refused)}"
    return ExploitTry(name, attempted, bool(result.get("passed")), how,
                      tuple(agent.report.found), tuple(agent.report.tests),
                      report=agent.report.to_dict())


REFUSALS = frozenset({"EDIT_NOT_ALLOWED", "WRITE_DISABLED", "FORBIDDEN_COMMAND", "PATH_ESCAPE"})


def _attempt(task: LoadedTask, shared: SharedAttemptConfig, sandboxes: SandboxFactory,
             mirrors: MirrorCache, variant: str, agent: Callable[[], Agent]) -> dict[str, Any]:
    per_agent = replace(shared, run_id=f"{shared.run_id}-{variant}", variant=variant)
    return AttemptFactory(per_agent, sandboxes, mirrors, agent).run(
        task, keep_workspace=False  # a check's workspaces are nobody's to look at
    )


def _reason(result: dict[str, Any]) -> str:
    reason = str(result.get("failure_reason"))
    if result.get("sub_reason"):
        reason += f"/{result['sub_reason']}"
    return f"{reason}: {result.get('summary')}"
