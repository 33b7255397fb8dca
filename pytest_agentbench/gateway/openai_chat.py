"""OpenAI Chat Completions on the gateway: the agent's request in, the answer out as one JSON
body or as server-sent events (`stream: true`), rebuilt from the complete upstream reply."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from pytest_agentbench.gateway.request import (
    BadRequest,
    ModelRequest,
    model_name,
    number,
    stop_list,
)
from pytest_agentbench.llm import ChatResult

PROTOCOL = "openai_chat"
_READ = {"model", "messages", "tools", "stream", "stream_options", "temperature", "top_p",
         "max_tokens", "max_completion_tokens", "seed", "stop", "tool_choice"}
_FORWARDED = ("response_format", "parallel_tool_calls")


def parse(body: Any) -> ModelRequest:
    if not isinstance(body, dict):
        raise BadRequest("expected a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        raise BadRequest("messages: required, a non-empty list of objects with a role")
    tools = body.get("tools")
    if tools is not None and not (isinstance(tools, list)
                                  and all(isinstance(t, dict) for t in tools)):
        raise BadRequest("tools: expected a list of objects")
    max_tokens = number(body, "max_completion_tokens", integer=True)
    if max_tokens is None:
        max_tokens = number(body, "max_tokens", integer=True)
    sampling = {"temperature": number(body, "temperature"), "top_p": number(body, "top_p"),
                "max_tokens": max_tokens, "seed": number(body, "seed", integer=True),
                "stop": stop_list(body.get("stop"), "stop")}
    options = body.get("stream_options")
    return ModelRequest(
        protocol=PROTOCOL, requested_model=model_name(body), messages=messages,
        tools=tools or None, stream=body.get("stream") is True,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
        sampling={k: v for k, v in sampling.items() if v is not None},
        tool_choice=body.get("tool_choice"),
        extra={k: body[k] for k in _FORWARDED if body.get(k) is not None},
        ignored=sorted(k for k in body if k not in _READ and k not in _FORWARDED))


def _message(result: ChatResult) -> dict[str, Any]:
    message = result.assistant_message()
    if message.get("tool_calls") and not message["content"]:
        message["content"] = None  # as OpenAI answers
    return message


def _finish_reason(result: ChatResult) -> str:
    if result.finish_reason:
        return result.finish_reason
    return "tool_calls" if _message(result).get("tool_calls") else "stop"


def _usage(result: ChatResult) -> dict[str, int]:
    u = result.usage
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "total_tokens": u.total_tokens or u.prompt_tokens + u.completion_tokens}


def response(result: ChatResult, model: str, call_id: str) -> dict[str, Any]:
    return {"id": call_id, "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": _message(result),
                                         "logprobs": None,
                                         "finish_reason": _finish_reason(result)}],
            "usage": _usage(result)}


def stream(result: ChatResult, model: str, call_id: str, include_usage: bool) -> Iterator[bytes]:
    """The reply as `chat.completion.chunk` events: the role, the text, each tool call whole,
    the finish reason, the usage when asked for, then `[DONE]`."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        data = {"id": call_id, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                             "finish_reason": finish}], **extra}
        return b"data: " + json.dumps(data).encode() + b"\n\n"

    message = _message(result)
    yield chunk({"role": "assistant", "content": ""})
    if message.get("content"):
        yield chunk({"content": message["content"]})
    for index, call in enumerate(message.get("tool_calls") or []):
        yield chunk({"tool_calls": [{"index": index, **call}]})
    yield chunk({}, _finish_reason(result))
    if include_usage:
        data = {"id": call_id, "object": "chat.completion.chunk", "created": created,
                "model": model, "choices": [], "usage": _usage(result)}
        yield b"data: " + json.dumps(data).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def error(status: int, message: str, code: str) -> dict[str, Any]:
    kind = {400: "invalid_request_error", 403: "permission_error", 404: "not_found_error",
            405: "invalid_request_error", 413: "invalid_request_error"}.get(status, "api_error")
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}
