"""The OpenAI chat-completions wire format: outgoing message normalization and parsing of a
completion body into a `ChatResult`. No I/O here; `client.py` does the HTTP and the retries."""

from __future__ import annotations

import json
from typing import Any

from pytest_agentbench.llm.base import AssistantMessage, ChatResult, TokenUsage, ToolCallsSource
from pytest_agentbench.llm.toolcall_fallback import (
    parse_fallback_tool_calls,
    parse_native_tool_calls,
)

NON_RETRYABLE_5XX = frozenset({501, 505})  # the server will never support this request


class MalformedCompletion(Exception):
    """A 2xx body that is not a chat completion. `transient` when it carries an error object
    whose code says "try again" (OpenRouter reports mid-generation failures with HTTP 200)."""

    def __init__(self, message: str, status: int | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.status, self.transient = status, transient


def is_retryable_status(status: int) -> bool:
    """408 (timeout), 429 (rate limit) and 5xx (upstream down, no provider) are transient."""
    return status in (408, 429) or (status >= 500 and status not in NON_RETRYABLE_5XX)


def normalize_message(message: dict[str, Any]) -> dict[str, Any]:
    """Strict servers reject `content: null` and object-valued tool-call arguments."""
    if message.get("role") != "assistant":
        return message
    out = dict(message)
    if out.get("content") is None:
        out["content"] = ""
    if out.get("tool_calls"):
        out["tool_calls"] = [_normalize_tool_call(tc) for tc in out["tool_calls"]]
    return out


def _normalize_tool_call(call: Any) -> Any:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return call
    fn = dict(call["function"])
    if not isinstance(fn.get("arguments"), str):
        fn["arguments"] = json.dumps(fn.get("arguments") or {})
    return {**call, "type": call.get("type", "function"), "function": fn}


def parse_completion(data: Any, tools: list[dict[str, Any]] | None) -> ChatResult:
    if not isinstance(data, dict):
        raise MalformedCompletion("response is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        error = data.get("error")
        if isinstance(error, dict):  # OpenRouter reports mid-generation failures with HTTP 200
            code = error.get("code")
            status = code if isinstance(code, int) else None
            text = f"error in response body: {error.get('message', error)}"
            transient = status is not None and is_retryable_status(status)
            raise MalformedCompletion(text, status=status, transient=transient)
        raise MalformedCompletion("response has no choices")
    choice = choices[0]
    raw_msg = choice.get("message")
    if not isinstance(raw_msg, dict):
        raise MalformedCompletion("first choice has no message")
    content = _content_text(raw_msg.get("content"))
    calls = parse_native_tool_calls(raw_msg.get("tool_calls"))
    if not calls and isinstance(raw_msg.get("function_call"), dict):  # legacy single call
        calls = parse_native_tool_calls([{"function": raw_msg["function_call"]}])
    source: ToolCallsSource = "native" if calls else "none"
    if not calls:
        calls = parse_fallback_tool_calls(content, _tool_names(tools))
        source = "fallback_json" if calls else "none"
    reasoning = raw_msg.get("reasoning") or raw_msg.get("reasoning_content")
    return ChatResult(
        message=AssistantMessage(content=content, tool_calls=calls,
                                 reasoning=reasoning if isinstance(reasoning, str) else None),
        finish_reason=choice.get("finish_reason"), usage=_usage(data.get("usage")),
        latency_ms=0, wall_ms=0, retries=0, model=_str_or_none(data.get("model")),
        tool_calls_source=source, response_id=_str_or_none(data.get("id")),
        provider=_str_or_none(data.get("provider")),
    )


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and isinstance(p.get("text", ""), str))
    return ""


def _usage(raw: Any) -> TokenUsage:
    if not isinstance(raw, dict):
        return TokenUsage()
    prompt, completion = _int(raw.get("prompt_tokens")), _int(raw.get("completion_tokens"))
    cost = raw.get("cost")
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    return TokenUsage(
        prompt_tokens=prompt, completion_tokens=completion,
        total_tokens=_int(raw.get("total_tokens")) or prompt + completion,
        cost_usd=float(cost) if isinstance(cost, int | float) else None,
        cached_tokens=_int_or_none(prompt_details, "cached_tokens"),
        reasoning_tokens=_int_or_none(completion_details, "reasoning_tokens"),
    )


def _tool_names(tools: list[dict[str, Any]] | None) -> set[str]:
    names: set[str] = set()
    for tool in tools or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return names


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _int_or_none(mapping: Any, key: str) -> int | None:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
