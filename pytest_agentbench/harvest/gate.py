"""The last gate of a harvested task: the project's own oracle+nop validation, `runs` times
each (default 3), through the real attempt pipeline (run/validation.py). A task is kept only
when the oracle passes every time and nop fails every time with TESTS_FAILED, and, with
`exploits` (`--exploit-gate`), when no try of the exploit agent passes on the first run
(hard-coding aside, which validate_task reports as a weak-test warning)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_agentbench.core.attempt_config import SharedAttemptConfig
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.run.validation import validate_task
from pytest_agentbench.sandbox.port import SandboxFactory
from pytest_agentbench.tasks.loader import TaskSpecError, load_task


@dataclass(frozen=True)
class Gate:
    shared: SharedAttemptConfig
    sandboxes: SandboxFactory
    mirrors: MirrorCache
    runs: int = 3
    exploits: bool = False  # the exploit agent's tries too, once, after the first run

    def check(self, task_dir: Path) -> tuple[str | None, str]:
        """(None, detail) when the task passes; else (reason, detail)."""
        try:
            task = load_task(task_dir / "task.yaml")
        except TaskSpecError as exc:
            return "TASK_INVALID", str(exc)[:300]
        for i in range(self.runs):
            shared = replace(self.shared, run_id=f"{self.shared.run_id}-{task.id}-{i}")
            result = validate_task(task, shared, self.sandboxes, self.mirrors,
                                   exploits=self.exploits and i == 0)
            if not result.ok and _oracle_and_nop_held(result.oracle, result.nop):
                return "GATE_EXPLOIT_PASSED", f"run {i + 1}: {result.detail}"[:300]
            if not result.ok:
                passed = (result.nop.get("result") or {}).get("passed")
                reason = "GATE_NOP_PASSED" if passed else "GATE_ORACLE_FAILED"
                oracle_ok = (result.oracle.get("result") or {}).get("passed")
                if not oracle_ok:
                    reason = "GATE_ORACLE_FAILED"
                return reason, f"run {i + 1}: {result.detail}"[:300]
        return None, f"oracle passed and nop failed {self.runs} of {self.runs}"


def _oracle_and_nop_held(oracle: dict[str, Any], nop: dict[str, Any]) -> bool:
    """The oracle passed and nop failed: a rejection then came from an exploit that passed."""
    return bool((oracle.get("result") or {}).get("passed")) and not (
        (nop.get("result") or {}).get("passed"))
