"""The verdict after the agent: the passing command's exit code decides, nothing it prints.

Which reason a failure gets is a fixed order: an edit-policy violation first (whatever the tests
say, an out-of-bounds change does not count), then a scoring timeout, then the agent's own
verdict (stuck, gave up, ...), then an overrun of the task budget, then plain TESTS_FAILED.
"""

from __future__ import annotations

from pytest_agentbench.core.agent_api import AgentOutcome
from pytest_agentbench.core.ports import ExecResult
from pytest_agentbench.core.signatures import signature
from pytest_agentbench.spec.records import Result
from pytest_agentbench.spec.taxonomy import Reason


def verdict(
    result: ExecResult, outcome: AgentOutcome, violation: str | None, over_budget: bool
) -> Result:
    sig = signature(result.exit_code, result.stdout, result.stderr)
    if violation:
        return Result(
            passed=False,
            exit_code=result.exit_code,
            signature=sig,
            failure_reason=Reason.TOOL_ERROR,
            sub_reason="EDIT_NOT_ALLOWED",
            summary=violation,
        )
    if result.ok:
        return Result(passed=True, exit_code=0, summary="passing_command exited 0")
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
    )
