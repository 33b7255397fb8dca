"""The OpenAI Responses API on the gateway (`POST /v1/responses`): the request's input items
(messages, `function_call`, `function_call_output`), `instructions`, function tools and
`tool_choice` translated into the OpenAI chat shape the model client speaks, and the reply
translated back into output items (`message` with `output_text`, `function_call`), as one JSON
body or as the Responses server-sent events (`response.created` ... `response.completed`).

The gateway keeps no conversation state: `previous_response_id` is refused (400; agents such as
Codex CLI send the whole conversation with `store: false`). Not translated, and named in the
call's `ignored` list: reasoning items, non-function tools (web search, file search, computer
use, custom tools), file inputs, `reasoning`, `include`, `store`, `metadata`, `truncation`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from pytest_agentbench.gateway import openai_chat
from pytest_agentbench.gateway.request import BadRequest, ModelRequest, model_name, number
from pytest_agentbench.llm import ChatResult

PROTOCOL = "openai_responses"
_READ = {"model", "input", "instructions", "tools", "tool_choice", "stream", "temperature",
         "top_p", "max_output_tokens", "parallel_tool_calls", "text", "previous_response_id"}
_ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = ("input_text", "output_text", "text", "refusal")


def parse(body: Any) -> ModelRequest:
    if not isinstance(body, dict):
        raise BadRequest("expected a JSON object")
    if body.get("previous_response_id") is not None:
        raise BadRequest("previous_response_id: the gateway keeps no responses; send the whole "
                         "conversation as input (store: false)")
    ignored = sorted(k for k in body if k not in _READ)
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise BadRequest("instructions: expected a string")
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    messages.extend(_input(body.get("input"), ignored))
    if not messages:
        raise BadRequest("input: required, a string or a non-empty list of items")
    request = ModelRequest(
        protocol=PROTOCOL, requested_model=model_name(body), messages=messages,
        tools=_tools(body.get("tools"), ignored), stream=body.get("stream") is True,
        sampling={k: v for k, v in {
            "temperature": number(body, "temperature"), "top_p": number(body, "top_p"),
            "max_tokens": number(body, "max_output_tokens", integer=True)}.items()
            if v is not None},
        tool_choice=_tool_choice(body.get("tool_choice")), ignored=ignored)
    if isinstance(body.get("parallel_tool_calls"), bool):
        request.extra["parallel_tool_calls"] = body["parallel_tool_calls"]
    _text_format(body.get("text"), request)
    return request


def _input(raw: Any, ignored: list[str]) -> list[dict[str, Any]]:
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise BadRequest("input: required, a string or a non-empty list of items")
    out: list[dict[str, Any]] = []
    for index, item in enumerate(raw):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise BadRequest(f"{where}: expected an object")
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            out.append(_message(item, where, ignored))
        elif kind == "function_call":
            _function_call(item, where, out)
        elif kind == "function_call_output":
            if not isinstance(item.get("call_id"), str):
                raise BadRequest(f"{where}: a function_call_output without a call_id")
            out.append({"role": "tool", "tool_call_id": item["call_id"],
                        "content": _output_text(item.get("output"), where, ignored)})
        else:
            _ignore(ignored, f"{kind} item")
    return out


def _message(item: dict[str, Any], where: str, ignored: list[str]) -> dict[str, Any]:
    role = item.get("role")
    if role not in _ROLES:
        raise BadRequest(f"{where}.role: expected one of {', '.join(_ROLES)}, got {role!r}")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": "system" if role == "developer" else role, "content": content}
    if not isinstance(content, list) or not all(isinstance(p, dict) for p in content):
        raise BadRequest(f"{where}.content: expected a string or a list of content parts")
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            parts.append({"type": "text", "text": str(part.get("text") or
                                                      part.get("refusal") or "")})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        else:
            _ignore(ignored, f"{kind} part")
    plain = role == "assistant" or all(p["type"] == "text" for p in parts)
    text: Any = "".join(p.get("text", "") for p in parts) if plain else parts
    return {"role": "system" if role == "developer" else role, "content": text}


def _function_call(item: dict[str, Any], where: str, out: list[dict[str, Any]]) -> None:
    """A call joins the assistant message right before it (the model's turn), or starts one."""
    name, arguments = item.get("name"), item.get("arguments")
    if not isinstance(name, str) or not isinstance(item.get("call_id"), str):
        raise BadRequest(f"{where}: a function_call needs a name and a call_id")
    if arguments is not None and not isinstance(arguments, str):
        raise BadRequest(f"{where}.arguments: expected a JSON string")
    call = {"id": item["call_id"], "type": "function",
            "function": {"name": name, "arguments": arguments or "{}"}}
    last = out[-1] if out else None
    if last is None or last.get("role") != "assistant":
        last = {"role": "assistant", "content": ""}
        out.append(last)
    last.setdefault("tool_calls", []).append(call)


def _output_text(output: Any, where: str, ignored: list[str]) -> str:
    if output is None or isinstance(output, str):
        return output or ""
    if isinstance(output, list):
        texts = []
        for part in output:
            if isinstance(part, dict) and part.get("type") in _TEXT_PARTS:
                texts.append(str(part.get("text") or ""))
            else:
                _ignore(ignored, "non-text function_call_output")
        return "\n".join(texts)
    raise BadRequest(f"{where}.output: expected a string or a list of content parts")


def _tools(tools: Any, ignored: list[str]) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise BadRequest("tools: expected a list of objects")
    out = []
    for tool in tools:
        if tool.get("type") != "function" or not isinstance(tool.get("name"), str):
            _ignore(ignored, f"tool {tool.get('type') or tool.get('name')}")
            continue
        function = {"name": tool["name"],
                    "parameters": tool.get("parameters") or {"type": "object"}}
        for key in ("description", "strict"):
            if tool.get(key) is not None:
                function[key] = tool[key]
        out.append({"type": "function", "function": function})
    return out or None


def _tool_choice(choice: Any) -> str | dict[str, Any] | None:
    if choice is None or choice in ("auto", "none", "required"):
        return str(choice) if choice is not None else None
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(
            choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise BadRequest("tool_choice: expected auto, none, required or "
                     "{type: function, name: ...}")


def _text_format(text: Any, request: ModelRequest) -> None:
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") in (None, "text"):
        return
    if fmt.get("type") == "json_object":
        request.extra["response_format"] = {"type": "json_object"}
    elif fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        request.extra["response_format"] = {"type": "json_schema", "json_schema": schema}
    else:
        raise BadRequest(f"text.format.type: expected text, json_object or json_schema, got "
                         f"{fmt.get('type')!r}")


def _ignore(ignored: list[str], what: str) -> None:
    if what not in ignored:
        ignored.append(what)


# -- the answer --------------------------------------------------------------------------------
def _items(result: ChatResult, call_id: str) -> list[dict[str, Any]]:
    suffix = call_id.removeprefix("resp_")
    items: list[dict[str, Any]] = []
    if result.message.content:
        items.append({"type": "message", "id": f"msg_{suffix}", "status": "completed",
                      "role": "assistant", "content": [{
                          "type": "output_text", "text": result.message.content,
                          "annotations": [], "logprobs": []}]})
    if result.tool_calls_source == "native":
        for index, call in enumerate(result.tool_calls):
            arguments = call.to_openai()["function"]["arguments"]
            items.append({"type": "function_call", "id": f"fc_{suffix}_{index}",
                          "call_id": call.id, "name": call.name, "arguments": arguments,
                          "status": "completed"})
    return items


def response(result: ChatResult, model: str, call_id: str) -> dict[str, Any]:
    u = result.usage
    incomplete = result.finish_reason == "length"
    return {
        "id": call_id, "object": "response", "created_at": int(time.time()),
        "status": "incomplete" if incomplete else "completed", "model": model,
        "output": _items(result, call_id), "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": None, "metadata": {}, "parallel_tool_calls": True,
        "temperature": None, "top_p": None, "tool_choice": "auto", "tools": [],
        "text": {"format": {"type": "text"}}, "truncation": "disabled",
        "usage": {"input_tokens": u.prompt_tokens,
                  "input_tokens_details": {"cached_tokens": u.cached_tokens or 0},
                  "output_tokens": u.completion_tokens,
                  "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens or 0},
                  "total_tokens": u.total_tokens or u.prompt_tokens + u.completion_tokens}}


def stream(result: ChatResult, model: str, call_id: str, include_usage: bool) -> Iterator[bytes]:
    """The Responses event sequence: created, in_progress, per output item its added / delta /
    done events (text as one delta, arguments as one delta), then completed."""
    sequence = iter(range(1 << 30))

    def event(kind: str, /, **data: Any) -> bytes:
        payload = {"type": kind, "sequence_number": next(sequence), **data}
        return f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode()

    final = response(result, model, call_id)
    start = {**final, "status": "in_progress", "output": [], "usage": None}
    yield event("response.created", response=start)
    yield event("response.in_progress", response=start)
    for index, item in enumerate(final["output"]):
        at = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            part = item["content"][0]
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "content": []})
            yield event("response.content_part.added", **at, content_index=0,
                        part={**part, "text": ""})
            yield event("response.output_text.delta", **at, content_index=0,
                        delta=part["text"], logprobs=[])
            yield event("response.output_text.done", **at, content_index=0,
                        text=part["text"], logprobs=[])
            yield event("response.content_part.done", **at, content_index=0, part=part)
        else:
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "arguments": ""})
            yield event("response.function_call_arguments.delta", **at,
                        delta=item["arguments"])
            yield event("response.function_call_arguments.done", **at, name=item["name"],
                        arguments=item["arguments"])
        yield event("response.output_item.done", output_index=index, item=item)
    done = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    yield event(done, response=final)


error = openai_chat.error
