"""Failure taxonomy: exactly one primary reason code for every non-pass, and whom it blames.

`agent` codes are the agent's failure (pytest FAILED); `task` codes mean the task is invalid
(pytest ERROR, excluded from agent statistics); `infra` codes mean the harness or a provider failed
(pytest ERROR, retried or investigated, never counted against the agent).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

Blame = Literal["agent", "task", "infra"]


class Reason(StrEnum):
    TASK_INVALID = "TASK_INVALID"  # task.yaml (or its directory) failed validation: never ran;
    # or, under the oracle, its reference solution is missing or does not apply
    SETUP_FAILED = "SETUP_FAILED"
    SETUP_DIRTY_WORKTREE = "SETUP_DIRTY_WORKTREE"
    BASELINE_NOT_FAILING = "BASELINE_NOT_FAILING"
    BASELINE_FLAKY = "BASELINE_FLAKY"
    VERIFIER_FLAKY = "VERIFIER_FLAKY"  # the passing command disagreed with itself on one state
    SANDBOX_ERROR = "SANDBOX_ERROR"
    LLM_ERROR = "LLM_ERROR"
    TESTS_FAILED = "TESTS_FAILED"
    TIMEOUT = "TIMEOUT"
    TOOL_ERROR = "TOOL_ERROR"
    AGENT_GAVE_UP = "AGENT_GAVE_UP"
    AGENT_STUCK = "AGENT_STUCK"
    AGENT_NO_PROGRESS = "AGENT_NO_PROGRESS"
    AGENT_KILLED_SANDBOX = "AGENT_KILLED_SANDBOX"  # a command of the agent's took its sandbox down


BLAME: dict[Reason, Blame] = {
    Reason.TASK_INVALID: "task",
    Reason.SETUP_FAILED: "task",
    Reason.SETUP_DIRTY_WORKTREE: "task",
    Reason.BASELINE_NOT_FAILING: "task",
    Reason.BASELINE_FLAKY: "task",
    Reason.VERIFIER_FLAKY: "task",
    Reason.SANDBOX_ERROR: "infra",
    Reason.LLM_ERROR: "infra",
    Reason.TESTS_FAILED: "agent",
    Reason.TIMEOUT: "agent",
    Reason.TOOL_ERROR: "agent",
    Reason.AGENT_GAVE_UP: "agent",
    Reason.AGENT_STUCK: "agent",
    Reason.AGENT_NO_PROGRESS: "agent",
    Reason.AGENT_KILLED_SANDBOX: "agent",
}

TASK_BLAMED = frozenset(r for r, b in BLAME.items() if b == "task")
# The task's own commands disagree with themselves: the baseline's failing command (run twice
# before the agent) or the passing command (re-run on the final state, --agentbench-regrade).
# Counted as "flaky" with the task's problems, never against the agent.
FLAKY_REASONS = frozenset({Reason.BASELINE_FLAKY, Reason.VERIFIER_FLAKY})

# Sub-reasons the built-in LLM agents (llm_v0 and the variants built on it) put under a primary
# reason; `record.result.sub_reason` says which limit or check ended the attempt.
AGENT_SUB_REASONS: dict[str, Reason] = {
    "MAX_STEPS": Reason.AGENT_GAVE_UP,  # params.max_steps / the task's agent.max_steps
    "BUDGET_STEPS": Reason.AGENT_GAVE_UP,  # budgets: checked before each model call
    "BUDGET_TOKENS": Reason.AGENT_GAVE_UP,
    "BUDGET_COST": Reason.AGENT_GAVE_UP,
    "BUDGET_WALL": Reason.AGENT_GAVE_UP,
    "UNVERIFIED_FINISH": Reason.AGENT_GAVE_UP,  # finish while the failing command still failed,
    # after params.max_unverified_finish refusals
    "TASK_BUDGET": Reason.TIMEOUT,  # the task's time budget ran out
    "PATCH_REJECTED": Reason.TOOL_ERROR,  # params.max_patch_rejections in a row
}


def blame(reason: Reason | str | None) -> Blame | None:
    return None if reason is None else BLAME[Reason(reason)]


def is_valid_task(reason: Reason | str | None) -> bool:
    """A task is valid for agent statistics unless its own baseline/setup disqualified it."""
    return reason is None or Reason(reason) not in TASK_BLAMED
