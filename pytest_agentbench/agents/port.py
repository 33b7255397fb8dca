"""The agent port: what an agent gets (context) and what it says back (outcome)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_agentbench.schemas.records import ModelInfo, Usage
from pytest_agentbench.schemas.task import TaskSpec
from pytest_agentbench.schemas.taxonomy import Reason

if TYPE_CHECKING:
    from pytest_agentbench.core.events import EventSink
    from pytest_agentbench.tools.toolbox import Toolbox


@dataclass
class AgentContext:
    task: TaskSpec
    task_dir: Path  # the task's folder in the taskpack (oracle.patch, scripts live here)
    toolbox: Toolbox
    events: EventSink
    failing_output: str  # the baseline's failing test output (truncated), the first observation
    failing_command: str
    deadline: float  # time.monotonic() by which the agent must stop
    max_steps: int
    params: dict[str, Any] = field(default_factory=dict)  # variant parameters for this agent
    artifacts_dir: Path | None = None  # <task artifacts>/agent: conversation.jsonl goes here
    on_step: Any = None  # callable(step: int) the harness uses to snapshot diffs after edits

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


@dataclass
class AgentOutcome:
    finished_by: str  # finish | done | max_steps | stuck | no_progress | budget | patch_rejected
    reason: Reason | None = None  # the agent's own verdict on a failure, used when tests fail
    sub_reason: str | None = None
    summary: str = ""
    model: ModelInfo | None = None
    usage: Usage | None = None
    steps: int = 0


class Agent(Protocol):
    name: str

    def run(self, ctx: AgentContext) -> AgentOutcome: ...


class AgentError(Exception):
    """Raised by an agent for a failure that is not the agent's fault (maps to `reason`)."""

    def __init__(self, reason: Reason, message: str, sub_reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.sub_reason = sub_reason
