"""What the gateway forwards, whatever protocol the agent spoke: a `ModelRequest` in the OpenAI
chat shape the model client sends, with the agent's sampling values kept apart so the gateway's
policy decides which of them reach the model (see `gateway.meter`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SAMPLING = ("temperature", "top_p", "max_tokens", "seed", "stop")


class BadRequest(Exception):
    """The agent sent something that is not a model call of its protocol: HTTP 400, never
    forwarded and never counted as a call."""


@dataclass
class ModelRequest:
    protocol: str  # openai_chat | openai_responses | anthropic_messages
    requested_model: str | None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    stream: bool = False
    include_usage: bool = False  # OpenAI stream_options.include_usage
    sampling: dict[str, Any] = field(default_factory=dict)  # the agent's, keys of SAMPLING
    tool_choice: str | dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # forwarded as is (response_format...)
    ignored: list[str] = field(default_factory=list)  # fields not forwarded, by name


def number(body: dict[str, Any], key: str, *, integer: bool = False) -> float | int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            integer and not isinstance(value, int)):
        kind = "an integer" if integer else "a number"
        raise BadRequest(f"{key}: expected {kind}, got {type(value).__name__}")
    return value


def stop_list(value: Any, key: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise BadRequest(f"{key}: expected a string or a list of strings")


def model_name(body: dict[str, Any]) -> str | None:
    value = body.get("model")
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"model: expected a string, got {type(value).__name__}")
    return value
