"""The verdict after the agent: the passing command's exit status decides, as observed by the
sandbox (never a line the command printed), and where pytest runs, its junit results must agree.

Which reason a failure gets is a fixed order: an edit-policy violation first (whatever the tests
say, an out-of-bounds change does not count), then a scoring timeout, then the agent's own
verdict (stuck, gave up, ...), then an overrun of the task budget, then plain TESTS_FAILED. An exit
status of 0 passes only if the evidence agrees: the results file exists when it is required, it
reports no failure or error and at least one passed test, and every expected test passed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_agentbench.agents.port import AgentOutcome
from pytest_agentbench.core.evidence import JunitResults
from pytest_agentbench.sandbox.port import ExecResult, SandboxExited
from pytest_agentbench.schemas.records import Result
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.text.signatures import signature

HARNESS_KILL = "killed by the harness"  # SandboxExited.status (sandbox/docker/sandbox.py)


@dataclass(frozen=True)
class ScoringEvidence:
    """What scoring saw besides the exit status."""

    results: JunitResults | None = None
    results_required: bool = False
    results_problem: str | None = None  # the file existed but could not be read
    expected_tests: tuple[str, ...] = ()  # the task's: must be reported and pass
    baseline_failing: tuple[str, ...] = ()  # junit names failing before the agent: if reported,
    # they must pass (a fix that makes the code skip its own test is no fix)


def verdict(
    result: ExecResult,
    outcome: AgentOutcome,
    violation: str | None,
    over_budget: bool,
    evidence: ScoringEvidence | None = None,
) -> Result:
    evidence = evidence or ScoringEvidence()
    sig = signature(result.exit_code, result.stdout, result.stderr)
    counts = _counts(evidence.results)
    if violation:
        return Result(
            passed=False,
            exit_code=result.exit_code,
            signature=sig,
            failure_reason=Reason.TOOL_ERROR,
            sub_reason="EDIT_NOT_ALLOWED",
            summary=violation,
            **counts,
        )
    if result.disk_limit_exceeded:  # whatever the exit status: the tests ran out of room
        return Result(
            passed=False,
            exit_code=result.exit_code,
            failure_reason=Reason.TESTS_FAILED,
            sub_reason="DISK_LIMIT_EXCEEDED",
            signature=sig,
            summary="passing_command exceeded the workspace disk limit",
            **counts,
        )
    if result.ok:
        contradiction = _contradiction(evidence)
        if contradiction is None:
            return Result(passed=True, exit_code=0, summary=_pass_summary(evidence), **counts)
        return Result(
            passed=False,
            exit_code=0,
            failure_reason=Reason.TESTS_FAILED,
            sub_reason=contradiction[0],
            signature=sig,
            summary=contradiction[1],
            **counts,
        )
    sub: str | None
    if result.timed_out:
        reason, sub = Reason.TIMEOUT, "PASSING_COMMAND_TIMEOUT"
    elif outcome.reason is not None:
        reason, sub = outcome.reason, outcome.sub_reason
    elif over_budget:
        reason, sub = Reason.TIMEOUT, "TASK_BUDGET"
    else:
        reason, sub = Reason.TESTS_FAILED, None
    detail = ", ".join(s.split(" ", 1)[-1] for s in sig[:3] if not s.startswith("output:"))
    summary = f"passing_command exited {result.exit_code}" + (f" ({detail})" if detail else "")
    if outcome.summary:
        summary += f"; agent: {outcome.summary}"
    return Result(
        passed=False,
        exit_code=result.exit_code,
        failure_reason=reason,
        sub_reason=sub,
        signature=sig,
        summary=summary,
        **counts,
    )


def _contradiction(evidence: ScoringEvidence) -> tuple[str, str] | None:
    """(sub_reason, summary) when an exit status of 0 is not backed by the test results."""
    results = evidence.results
    if evidence.results_problem:
        return "RESULTS_UNREADABLE", f"passing_command exited 0 but {evidence.results_problem}"
    if results is None:
        if evidence.results_required or evidence.expected_tests:
            return (
                "RESULTS_MISSING",
                "passing_command exited 0 but pytest wrote no test results: the test run "
                "ended before pytest reported (an exit forced by the code under test?)",
            )
        return None
    if results.failed or results.errors:
        return (
            "EXIT_STATUS_CONTRADICTS_RESULTS",
            f"passing_command exited 0 but pytest reported {results.failed} failed and "
            f"{results.errors} errors",
        )
    if results.passed == 0:
        return "NO_TESTS_PASSED", "passing_command exited 0 but no test passed"
    missing = [(t, results.outcome_of(t)) for t in evidence.expected_tests]
    missing += [(t, _reported(results, t)) for t in evidence.baseline_failing]
    missing = [(t, o) for t, o in missing if o != "passed" and (o or t in evidence.expected_tests)]
    if missing:
        shown = ", ".join(f"{t} ({outcome or 'not run'})" for t, outcome in missing[:5])
        return "EXPECTED_TESTS_NOT_PASSED", f"expected tests did not pass: {shown}"
    return None


def _reported(results: JunitResults, name: str) -> str | None:
    """A test's junit outcome; when it was not reported, that of the module or class holding
    it: a module skipped at collection (by the code under test it imports) hides its tests, and
    they must not count as "not run"."""
    if name in results.outcomes:
        return results.outcomes[name]
    holders = [n for n in results.outcomes if name.startswith(n + ".")]
    return results.outcomes[max(holders, key=len)] if holders else None


def sandbox_exit(phase: str, exc: SandboxExited, where: str) -> tuple[Reason, str, str]:
    """(reason, sub_reason, summary) for a sandbox that stopped while the engine answers.

    No command can signal PID 1 (it runs as another uid), so a stop is the commands' doing only
    when the kernel killed it for memory or the harness had to kill it because a command's
    processes could not be stopped; then it is the task's in setup and baseline and the agent's
    after. A lifetime that ran out is a timeout. Anything else came from outside the sandbox
    (`docker kill`, an engine restart, another run's sweep): infrastructure."""
    if exc.expired:
        return Reason.TIMEOUT, "LIFETIME", f"the sandbox's lifetime ran out {where}"
    if not (exc.oom_killed or exc.status == HARNESS_KILL):
        return Reason.SANDBOX_ERROR, "SANDBOX_EXITED", f"the sandbox was stopped {where}: {exc}"
    why = "out of memory" if exc.oom_killed else "a command's processes could not be stopped"
    if phase in ("prepare", "setup", "baseline"):
        return Reason.SETUP_FAILED, "SANDBOX_EXITED", f"the {phase} sandbox stopped ({why}): {exc}"
    return Reason.AGENT_KILLED_SANDBOX, "OOM" if exc.oom_killed else "UNSTOPPABLE", (
        f"the sandbox stopped {where} ({why}): {exc}"
    )


def _pass_summary(evidence: ScoringEvidence) -> str:
    results = evidence.results
    if results is None:
        return "passing_command exited 0"
    return f"passing_command exited 0; {results.passed} passed, {results.skipped} skipped"


def _counts(results: JunitResults | None) -> dict[str, int | None]:
    if results is None:
        return {"tests_passed": None, "tests_failed": None}
    return {"tests_passed": results.passed, "tests_failed": results.failed + results.errors}
