"""The model-client port and the plain data it speaks: `ChatParams` in, `ChatResult` out.

Everything here is a dataclass of JSON-friendly values; `to_dict()` gives the record view.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

ToolCallsSource = Literal["native", "fallback_json", "none"]


@dataclass(frozen=True)
class ChatParams:
    """Per-call inference parameters. `None` means "do not send it" (server default).

    `deadline_monotonic` (a `time.monotonic()` value) bounds the whole call including retries:
    request timeouts shrink to fit and no backoff wait is started that would end after it.
    """

    model: str
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    tool_choice: str | dict[str, Any] | None = None
    stop: list[str] | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    deadline_monotonic: float | None = None

    def body_fields(self) -> dict[str, Any]:
        """The request-body fields these params contribute (without messages/tools)."""
        body: dict[str, Any] = {"model": self.model}
        for name in ("temperature", "top_p", "max_tokens", "seed", "stop"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        return body

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("deadline_monotonic")
        return out


@dataclass
class ToolCall:
    """One tool call. `arguments` is always a dict; when the model sent arguments that are not a
    JSON object, `arguments` is `{}`, `arguments_error` says why and `raw_arguments` keeps the
    text so the agent can show the model what went wrong."""

    id: str
    name: str
    arguments: dict[str, Any]
    arguments_error: str | None = None
    raw_arguments: str = ""

    def to_openai(self) -> dict[str, Any]:
        args = self.raw_arguments if self.arguments_error else json.dumps(self.arguments)
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": args or "{}"}}


@dataclass
class AssistantMessage:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None


@dataclass
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None  # OpenRouter's `usage.cost` (credits, 1 credit = 1 USD)
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


@dataclass
class ChatResult:
    """One successful chat completion. `latency_ms` is the successful request's round trip;
    `wall_ms` the whole call including failed attempts and backoff waits."""

    message: AssistantMessage
    finish_reason: str | None
    usage: TokenUsage
    latency_ms: int
    wall_ms: int
    retries: int
    model: str | None  # the model id the server says answered (may differ from the request)
    tool_calls_source: ToolCallsSource
    response_id: str | None = None
    provider: str | None = None  # OpenRouter names the upstream provider

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.message.tool_calls

    def assistant_message(self) -> dict[str, Any]:
        """The message to append to the conversation. `content` is always a string (strict
        servers reject null next to `tool_calls`). Fallback-parsed calls are not echoed as native
        `tool_calls`: the server never produced them, so the content carries them already."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.message.content or ""}
        if self.tool_calls_source == "native" and self.message.tool_calls:
            msg["tool_calls"] = [tc.to_openai() for tc in self.message.tool_calls]
        return msg

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class ModelClient(Protocol):
    """The port the agents use. Implementations raise `LLMError` subclasses on failure."""

    def chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
        params: ChatParams,
    ) -> ChatResult: ...
