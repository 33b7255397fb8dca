"""Anthropic Messages on the gateway: the request translated into the OpenAI chat shape the
model client speaks (system, text, images, tool_use, tool_result, tools, tool_choice), and the
reply translated back, as one JSON body or as Anthropic's server-sent events.

Not translated, and named in the call's `ignored` list: thinking blocks, server tools (web
search, code execution), documents and images inside tool results, `top_k`, `metadata`."""

from __future__ import annotations

import json
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

PROTOCOL = "anthropic_messages"
_READ = {"model", "messages", "system", "tools", "tool_choice", "stream", "max_tokens",
         "temperature", "top_p", "stop_sequences"}
_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens",
         "function_call": "tool_use"}


def parse(body: Any) -> ModelRequest:
    if not isinstance(body, dict):
        raise BadRequest("expected a JSON object")
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise BadRequest("messages: required, a non-empty list")
    ignored = sorted(k for k in body if k not in _READ)
    messages = _system(body.get("system"))
    for index, message in enumerate(raw):
        messages.extend(_message(message, index, ignored))
    request = ModelRequest(
        protocol=PROTOCOL, requested_model=model_name(body), messages=messages,
        tools=_tools(body.get("tools"), ignored), stream=body.get("stream") is True,
        sampling={k: v for k, v in {
            "temperature": number(body, "temperature"), "top_p": number(body, "top_p"),
            "max_tokens": number(body, "max_tokens", integer=True),
            "stop": stop_list(body.get("stop_sequences"), "stop_sequences")}.items()
            if v is not None},
        ignored=ignored)
    _tool_choice(body.get("tool_choice"), request)
    return request


def _system(system: Any) -> list[dict[str, Any]]:
    if system is None:
        return []
    if isinstance(system, str):
        return [{"role": "system", "content": system}] if system else []
    if isinstance(system, list):
        text = "\n".join(b.get("text", "") for b in system
                         if isinstance(b, dict) and b.get("type") == "text")
        return [{"role": "system", "content": text}] if text else []
    raise BadRequest("system: expected a string or a list of text blocks")


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list) and all(isinstance(b, dict) for b in content):
        return content
    raise BadRequest(f"{where}.content: expected a string or a list of content blocks")


def _message(message: Any, index: int, ignored: list[str]) -> list[dict[str, Any]]:
    where = f"messages[{index}]"
    if isinstance(message, dict) and message.get("role") == "system":  # Claude Code 2.1 sends
        return _system(message.get("content"))  # its environment so, after the first message
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        raise BadRequest(f"{where}: expected an object with role user, assistant or system")
    blocks = _blocks(message.get("content"), where)
    if message["role"] == "assistant":
        return [_assistant(blocks, where, ignored)]
    tool_results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "tool_result":
            tool_results.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id")),
                                 "content": _result_text(block.get("content"), ignored)})
        elif kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image" and isinstance(block.get("source"), dict):
            parts.append(_image(block["source"]))
        else:
            _ignore(ignored, f"{kind} block")
    out = tool_results
    if parts:
        plain = all(p["type"] == "text" for p in parts)
        content: Any = "\n".join(p["text"] for p in parts) if plain else parts
        out = [*out, {"role": "user", "content": content}]
    return out


def _assistant(blocks: list[dict[str, Any]], where: str, ignored: list[str]) -> dict[str, Any]:
    texts, calls = [], []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            if not isinstance(block.get("name"), str):
                raise BadRequest(f"{where}: a tool_use block without a name")
            calls.append({"id": str(block.get("id")), "type": "function", "function": {
                "name": block["name"], "arguments": json.dumps(block.get("input") or {})}})
        else:
            _ignore(ignored, f"{kind} block")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    return message


def _result_text(content: Any, ignored: list[str]) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        texts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            else:
                _ignore(ignored, "non-text tool_result content")
        return "\n".join(texts)
    raise BadRequest("tool_result.content: expected a string or a list of blocks")


def _image(source: dict[str, Any]) -> dict[str, Any]:
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
    else:
        url = str(source.get("url", ""))
    return {"type": "image_url", "image_url": {"url": url}}


def _tools(tools: Any, ignored: list[str]) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise BadRequest("tools: expected a list of objects")
    out = []
    for tool in tools:
        if tool.get("type") not in (None, "custom") or not isinstance(tool.get("name"), str):
            _ignore(ignored, f"server tool {tool.get('type') or tool.get('name')}")
            continue
        function = {"name": tool["name"],
                    "parameters": tool.get("input_schema") or {"type": "object"}}
        if tool.get("description"):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out or None


def _tool_choice(choice: Any, request: ModelRequest) -> None:
    if choice is None:
        return
    if not isinstance(choice, dict):
        raise BadRequest("tool_choice: expected an object with a type")
    kind = choice.get("type")
    if kind == "tool":
        request.tool_choice = {"type": "function", "function": {"name": choice.get("name")}}
    elif kind in ("auto", "any", "none"):
        request.tool_choice = {"auto": "auto", "any": "required", "none": "none"}[kind]
    else:
        raise BadRequest(f"tool_choice.type: expected auto, any, tool or none, got {kind!r}")
    if choice.get("disable_parallel_tool_use") is True:
        request.extra["parallel_tool_calls"] = False


def _ignore(ignored: list[str], what: str) -> None:
    if what not in ignored:
        ignored.append(what)


def _content(result: ChatResult) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if result.message.content:
        blocks.append({"type": "text", "text": result.message.content})
    if result.tool_calls_source == "native":
        blocks.extend({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                      for c in result.tool_calls)
    return blocks


def _stop_reason(result: ChatResult) -> str:
    if result.tool_calls_source == "native" and result.tool_calls:
        return "tool_use"
    return _STOP.get(result.finish_reason or "stop", "end_turn")


def response(result: ChatResult, model: str, call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "message", "role": "assistant", "model": model,
            "content": _content(result), "stop_reason": _stop_reason(result),
            "stop_sequence": None, "usage": {"input_tokens": result.usage.prompt_tokens,
                                             "output_tokens": result.usage.completion_tokens}}


def stream(result: ChatResult, model: str, call_id: str, include_usage: bool) -> Iterator[bytes]:
    """Anthropic's event sequence: message_start, one start/delta/stop per content block,
    message_delta with the stop reason and the output tokens, message_stop."""

    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    start = {**response(result, model, call_id), "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": result.usage.prompt_tokens, "output_tokens": 0}
    yield event("message_start", {"message": start})
    for index, block in enumerate(_content(result)):
        if block["type"] == "text":
            yield event("content_block_start", {"index": index,
                                                "content_block": {"type": "text", "text": ""}})
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            yield event("content_block_start", {"index": index, "content_block": {
                **block, "input": {}}})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield event("content_block_delta", {"index": index, "delta": delta})
        yield event("content_block_stop", {"index": index})
    yield event("message_delta", {"delta": {"stop_reason": _stop_reason(result),
                                            "stop_sequence": None},
                                  "usage": {"output_tokens": result.usage.completion_tokens}})
    yield event("message_stop", {})


def error(status: int, message: str, code: str) -> dict[str, Any]:
    kind = {400: "invalid_request_error", 403: "permission_error", 404: "not_found_error",
            405: "invalid_request_error", 413: "request_too_large"}.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}
