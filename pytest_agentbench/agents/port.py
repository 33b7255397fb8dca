"""The agent port: what an agent gets (AgentContext with its Tools and EventLog), what it says
back (AgentOutcome, AgentError), and how one is made (AgentFactory).

Tools and EventLog are Protocols: the pipeline (core/) implements them, agents depend only on
this module, so no agent imports core/ or the concrete Toolbox.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pytest_agentbench.schemas.events import Actor, Event
from pytest_agentbench.schemas.records import ModelInfo, Usage
from pytest_agentbench.schemas.task import TaskSpec
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.tools.results import ToolResult


class Tools(Protocol):
    """The agent's tools, under the task's edit policy (a recording `tools.toolbox.Toolbox`).

    The tools and their JSON schemas are `tools.schemas.TOOL_SCHEMAS` (without `WRITE_TOOLS`
    when the task sets `agent.allow_file_write: false`).
    """

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run one tool. A refused, failed or unknown call comes back as a result with
        `ok=False` and an `error_type`, never as an exception; only a sandbox that went away
        raises (the harness handles it)."""
        ...


class EventLog(Protocol):
    """The attempt's event stream (events.jsonl, written by core.event_sink.EventSink)."""

    def emit(self, event: Event, /, actor: Actor = "harness") -> str:
        """Write one event (a class of schemas/events.py, e.g. `LLMRequest(...)`) with the
        envelope the log adds (ids, sequence, times, `actor`); returns its event id."""
        ...


@dataclass
class AgentContext:
    task: TaskSpec
    task_dir: Path  # the task's folder in the taskpack (oracle.patch, scripts live here)
    toolbox: Tools
    events: EventLog
    failing_output: str  # the baseline's failing test output (truncated), the first observation
    failing_command: str
    deadline: float  # time.monotonic() by which the agent must stop
    max_steps: int
    # The variant's params. Agents made by `agents.variants.agent_builder` get them at
    # construction; an agent from an old-form factory (`factory()`) reads them here.
    params: dict[str, Any] = field(default_factory=dict)
    artifacts_dir: Path | None = None  # <task artifacts>/agent: conversation.jsonl goes here
    # for an agent with `needs` (ProgramNeeds): the host directory the sandbox sees as
    # AGENTBENCH_GATEWAY_DIR (its gateway listens on a socket there), and its program runner
    gateway_dir: Path | None = None
    programs: Programs | None = None

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


@dataclass(frozen=True)
class ProgramNeeds:
    """What an agent that runs a program inside the sandbox (agents/command.py) needs there,
    declared as the agent's `needs` attribute so the sandbox is made with it: a directory for
    the model gateway's socket (`AGENTBENCH_GATEWAY_DIR` inside) and the directory its program
    is in (`AGENTBENCH_PROGRAM_DIR`): a host directory of its own, or the one `install` fills
    once per image; both read-only."""

    program_dir: Path | None = None
    install: str | None = None  # commands that install the program (core/program_install.py)


@dataclass(frozen=True)
class ProgramResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: int


@dataclass(frozen=True)
class GatewayLink:
    """The attempt's model gateway as a program reaches it: 127.0.0.1:`port` inside the
    sandbox, relayed to `socket` (the gateway's Unix socket on the host)."""

    port: int
    socket: Path


class Programs(Protocol):
    """Runs the agent's own program in the sandbox (one command; its output is logged and it
    is an event like any harness command). With `gateway`, a relay listens on the sandbox's
    loopback first and carries each connection to the gateway's socket (core/sandbox_programs)."""

    def run(self, command: str, *, env: dict[str, str], timeout_sec: float,
            gateway: GatewayLink | None = None) -> ProgramResult:
        ...

    def read(self, path: str, max_bytes: int) -> bytes | None:
        """A file the program left in the sandbox (its trajectory), or None."""
        ...


AgentFactory = Callable[..., Agent]
"""Makes one agent for one attempt (a class or any callable), offered under a name by the entry
point group `pytest_agentbench.agents` or the `pytest_agentbench_agents` hook.

`factory(**params)`: called with the variant's `params:` as keyword arguments when its signature
takes them all. `factory()` (the old form, still accepted): called without arguments when it
does not; the agent then reads `ctx.params`."""


class AgentError(Exception):
    """Raised by an agent for a failure that is not the agent's fault (maps to `reason`).

    `usage` and `model` say what the agent spent before it failed (they go into the record)."""

    def __init__(
        self,
        reason: Reason,
        message: str,
        sub_reason: str | None = None,
        *,
        usage: Usage | None = None,
        model: ModelInfo | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.sub_reason = sub_reason
        self.usage = usage
        self.model = model


def attach_spend(exc: BaseException, usage: Usage | None, model: ModelInfo | None) -> None:
    """Mark an exception an agent lets pass (a sandbox that went away during a tool call, a bug)
    with what the agent spent before it, so the record keeps the cost of the calls made."""
    if not isinstance(exc, AgentError):
        exc.agent_usage = usage  # type: ignore[attr-defined]
        exc.agent_model = model  # type: ignore[attr-defined]


def spend_of(exc: BaseException) -> tuple[Usage | None, ModelInfo | None]:
    """(usage, model) an agent recorded on `exc` (AgentError's own, or `attach_spend`'s)."""
    if isinstance(exc, AgentError):
        return exc.usage, exc.model
    return getattr(exc, "agent_usage", None), getattr(exc, "agent_model", None)
