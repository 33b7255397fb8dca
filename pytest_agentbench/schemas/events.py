"""Events: a versioned discriminated union with one stable envelope.

An event is one small class per type (`CommandFinished`, `Note`, ...) holding its payload; the
pipeline writes it as an object, `sink.emit(CommandFinished(...))`, so mypy and pydantic check its
fields where it is made. The sink (core/event_sink.py) adds the `Envelope` (ids, sequence, wall and
monotonic time, causality, actor) and writes one JSON line: the envelope's fields, then `type`,
then the payload's. Readers validate such a line with `EventAdapter`.
"""

from __future__ import annotations

import functools
import operator
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model


def utc_now() -> str:
    """The time format of every envelope and record timestamp: UTC, milliseconds, a Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

EVENT_VERSION: Literal[1] = 1
Actor = Literal["harness", "agent", "tool", "sandbox", "llm"]


class Envelope(BaseModel):
    """What the sink adds to every event it writes."""

    model_config = ConfigDict(extra="forbid")

    event_version: Literal[1] = EVENT_VERSION
    event_id: str
    seq: int = Field(ge=0)  # per attempt, strictly increasing
    ts: str  # ISO-8601 UTC
    mono_ms: int  # milliseconds since the attempt started (monotonic clock)
    run_id: str
    task_id: str
    attempt_id: str
    span_id: str | None = None
    parent_event_id: str | None = None
    actor: Actor = "harness"


class EventBase(BaseModel):
    """An event's payload; `type` selects the class."""

    model_config = ConfigDict(extra="forbid")


class TaskStarted(EventBase):
    type: Literal["task_started"] = "task_started"
    variant: str
    worker: str


class PhaseStarted(EventBase):
    type: Literal["phase_started"] = "phase_started"
    phase: str


class PhaseFinished(EventBase):
    type: Literal["phase_finished"] = "phase_finished"
    phase: str
    ok: bool
    duration_ms: int
    detail: str = ""


class CommandFinished(EventBase):
    """A harness-run command (setup, capture, baseline, scoring) has finished."""

    type: Literal["command_finished"] = "command_finished"
    phase: str
    command: str
    exit_code: int
    duration_ms: int
    timed_out: bool = False
    oom_killed: bool = False
    disk_limit_exceeded: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_sha256: str = ""


class ToolCallStarted(EventBase):
    type: Literal["tool_call_started"] = "tool_call_started"
    tool: str
    step: int
    inputs_sha256: str


class ToolCallFinished(EventBase):
    type: Literal["tool_call_finished"] = "tool_call_finished"
    tool: str
    step: int
    ok: bool
    error_type: str | None = None
    duration_ms: int
    outputs_sha256: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    changed_files: list[str] = Field(default_factory=list)


class EditRefused(EventBase):
    type: Literal["edit_refused"] = "edit_refused"
    path: str
    rule: str  # editable_globs | readonly_globs | max_changed_files | ...


class PatchApplied(EventBase):
    type: Literal["patch_applied"] = "patch_applied"
    step: int
    changed_files: list[str]
    diff_path: str


class AgentTurn(EventBase):
    type: Literal["agent_turn_started"] = "agent_turn_started"
    step: int


class LLMRequest(EventBase):
    type: Literal["llm_request"] = "llm_request"
    step: int
    model: str
    messages: int
    prompt_sha256: str


class LLMResponse(EventBase):
    type: Literal["llm_response"] = "llm_response"
    step: int
    finish_reason: str | None = None
    tool_calls: list[str] = Field(default_factory=list)
    tool_calls_source: str = "native"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    latency_ms: int = 0
    retries: int = 0


class LLMRetry(EventBase):
    type: Literal["llm_retry"] = "llm_retry"
    attempt: int
    status: int | None = None
    wait_sec: float
    error: str = ""


class DelegationStart(EventBase):
    """A sub-agent span begins (the `subagents` variant): a router decision or a specialist's
    delegation. `span_id` / `parent_span_id` are the nodes of `agent/delegation.json`."""

    type: Literal["delegation_start"] = "delegation_start"
    span_id: str
    parent_span_id: str | None = None
    role: str
    step: int
    brief: str = ""


class DelegationEnd(EventBase):
    """A sub-agent span ends: its status (ok, failed, budget, invalid, stopped...), what its
    model calls spent, and a one-line summary."""

    type: Literal["delegation_end"] = "delegation_end"
    span_id: str
    role: str
    status: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    summary: str = ""


class TaskFinished(EventBase):
    type: Literal["task_finished"] = "task_finished"
    passed: bool
    failure_reason: str | None = None
    duration_ms: int


class Note(EventBase):
    """Anything else worth keeping in the stream (warnings, budget stops, worker crashes)."""

    type: Literal["note"] = "note"
    kind: str
    message: str
    data: dict[str, Any] = Field(default_factory=dict)


Event = Annotated[
    TaskStarted
    | PhaseStarted
    | PhaseFinished
    | CommandFinished
    | ToolCallStarted
    | ToolCallFinished
    | EditRefused
    | PatchApplied
    | AgentTurn
    | LLMRequest
    | LLMResponse
    | LLMRetry
    | DelegationStart
    | DelegationEnd
    | TaskFinished
    | Note,
    Field(discriminator="type"),
]
EVENT_CLASSES: tuple[type[EventBase], ...] = (
    TaskStarted,
    PhaseStarted,
    PhaseFinished,
    CommandFinished,
    ToolCallStarted,
    ToolCallFinished,
    EditRefused,
    PatchApplied,
    AgentTurn,
    LLMRequest,
    LLMResponse,
    LLMRetry,
    DelegationStart,
    DelegationEnd,
    TaskFinished,
    Note,
)


def _written(cls: type[EventBase]) -> type[BaseModel]:
    """The line the sink writes for `cls`: the envelope's fields, then the event's."""
    return create_model(f"Written{cls.__name__}", __base__=(cls, Envelope))


_WrittenEvent: Any = Annotated[
    functools.reduce(operator.or_, map(_written, EVENT_CLASSES)), Field(discriminator="type")
]
#: Validates one line of events.jsonl: an envelope and one of the events, selected by `type`.
EventAdapter: TypeAdapter[Any] = TypeAdapter(_WrittenEvent)
