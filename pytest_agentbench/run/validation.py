"""The oracle+nop check of a task, shared by `agentbench validate-tasks --run` and the doctor's
end-to-end check: the task runs through the real pipeline twice, once with its oracle patch and
once with an agent that does nothing.

A task is accepted when the oracle passes (so its setup works, its baseline fails consistently
and the fix is scorable) and nop fails with TESTS_FAILED (so there is something for an agent to
fix, and the tests, not the harness, say so). The oracle is judged first: when it fails, the
task itself is broken and that is what the detail says (its setup or baseline verdict as is, an
oracle that does not fix the tests as `oracle fails: ...`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pytest_agentbench.agents.builtin import NopAgent, OracleAgent
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.run.factory import AttemptFactory, SharedAttemptConfig
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


def validate_task(
    task: LoadedTask, shared: SharedAttemptConfig, sandboxes: SandboxFactory, mirrors: MirrorCache
) -> TaskValidation:
    """Run `task` with the oracle, then with nop, each as variant and run `<shared.run_id>-<agent>`
    (the rest of `shared` as given), and judge the two records."""
    records: dict[str, dict[str, Any]] = {}
    for agent in (OracleAgent, NopAgent):
        per_agent = replace(shared, run_id=f"{shared.run_id}-{agent.name}", variant=agent.name)
        records[agent.name] = AttemptFactory(per_agent, sandboxes, mirrors, agent).run(
            task, keep_workspace=False  # a check's workspaces are nobody's to look at
        )
    ok, detail = judge(records["oracle"], records["nop"])
    return TaskValidation(ok, detail, records["oracle"], records["nop"])


def _reason(result: dict[str, Any]) -> str:
    reason = str(result.get("failure_reason"))
    if result.get("sub_reason"):
        reason += f"/{result['sub_reason']}"
    return f"{reason}: {result.get('summary')}"
