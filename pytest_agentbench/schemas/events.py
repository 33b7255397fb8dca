"""Events: a versioned discriminated union with one stable envelope (spec §4, improvement 11).

Every event carries the envelope (ids, sequence, wall and monotonic time, causality, actor); the
`type` field selects the payload model. Readers validate with `EventAdapter`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

EVENT_VERSION: Literal[1] = 1
Actor = Literal["harness", "agent", "tool", "sandbox", "llm"]


class Envelope(BaseModel):
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


class TaskStarted(Envelope):
    type: Literal["task_started"] = "task_started"
    variant: str
    worker: str


class PhaseStarted(Envelope):
    type: Literal["phase_started"] = "phase_started"
    phase: str


class PhaseFinished(Envelope):
    type: Literal["phase_finished"] = "phase_finished"
    phase: str
    ok: bool
    duration_ms: int
    detail: str = ""


class CommandFinished(Envelope):
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


class ToolCallStarted(Envelope):
    type: Literal["tool_call_started"] = "tool_call_started"
    tool: str
    step: int
    inputs_sha256: str


class ToolCallFinished(Envelope):
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


class EditRefused(Envelope):
    type: Literal["edit_refused"] = "edit_refused"
    path: str
    rule: str  # editable_globs | readonly_globs | max_changed_files | ...


class PatchApplied(Envelope):
    type: Literal["patch_applied"] = "patch_applied"
    step: int
    changed_files: list[str]
    diff_path: str


class AgentTurn(Envelope):
    type: Literal["agent_turn_started"] = "agent_turn_started"
    step: int


class LLMRequest(Envelope):
    type: Literal["llm_request"] = "llm_request"
    step: int
    model: str
    messages: int
    prompt_sha256: str


class LLMResponse(Envelope):
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


class LLMRetry(Envelope):
    type: Literal["llm_retry"] = "llm_retry"
    attempt: int
    status: int | None = None
    wait_sec: float
    error: str = ""


class TaskFinished(Envelope):
    type: Literal["task_finished"] = "task_finished"
    passed: bool
    failure_reason: str | None = None
    duration_ms: int


class Note(Envelope):
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
    | TaskFinished
    | Note,
    Field(discriminator="type"),
]
EventAdapter: TypeAdapter[Event] = TypeAdapter(Event)
EVENT_TYPES: dict[str, type[Envelope]] = {
    cls.model_fields["type"].default: cls
    for cls in (
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
        TaskFinished,
        Note,
    )
}
