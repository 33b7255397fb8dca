"""Tool-call parsing: native OpenAI `tool_calls`, and a fallback for models that write the call
as JSON text in `content` instead.

Accepted fallback shapes (bare or inside ``` / ```json fences, one or several per message):
    {"name": "read_file", "arguments": {...}}          also "args" / "parameters" / "input"
    {"tool": "read_file", "args": {...}}               also "tool_name" / "function": "<name>"
    {"function": {"name": ..., "arguments": ...}}      an OpenAI tool call written out
    {"tool_calls": [ ...any of the above... ]}  or  [ ...any of the above... ]
Only names among the offered tools count, so JSON the model merely quotes (file contents, test
output) is not mistaken for a call unless it names a real tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from typing import Any

from pytest_agentbench.llm.base import ToolCall

_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "args", "parameters", "input")
_MAX_SCAN_CHARS = 200_000  # model output is small; this bounds the worst case
_decoder = json.JSONDecoder()
_OPENERS = re.compile(r"[{\[]")


def parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None, str]:
    """(arguments, error, raw text) from a tool call's `arguments`, which servers send as a JSON
    string (OpenAI) or sometimes already as an object."""
    if raw is None or raw == "":
        return {}, None, ""
    if isinstance(raw, dict):
        return raw, None, json.dumps(raw)
    if not isinstance(raw, str):
        return {}, f"arguments must be a JSON object, got {type(raw).__name__}", json.dumps(raw)
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return {}, f"arguments are not valid JSON: {exc}", raw
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}", raw
    return value, None, raw


def parse_native_tool_calls(raw_calls: Any) -> list[ToolCall]:
    """Tool calls from an OpenAI `message.tool_calls` list (malformed entries kept, with error)."""
    calls: list[ToolCall] = []
    if not isinstance(raw_calls, list):
        return calls
    for index, raw in enumerate(raw_calls):
        if not isinstance(raw, dict):
            continue
        fn = raw.get("function")
        if not isinstance(fn, dict):
            fn = {}
        name = fn.get("name") if isinstance(fn.get("name"), str) else ""
        args, error, raw_text = parse_arguments(fn.get("arguments"))
        if not name:
            error = error or "tool call has no function name"
        call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else None
        calls.append(ToolCall(id=call_id or f"call_{index}", name=str(name), arguments=args,
                              arguments_error=error, raw_arguments=raw_text))
    return calls


def parse_fallback_tool_calls(content: str, tool_names: Collection[str]) -> list[ToolCall]:
    """Tool calls written as JSON in `content`, restricted to `tool_names`, in text order."""
    if not content or not tool_names:
        return []
    calls: list[ToolCall] = []
    for value in _json_values(content[:_MAX_SCAN_CHARS]):
        for obj in _candidates(value):
            call = _as_call(obj, tool_names, len(calls))
            if call is not None:
                calls.append(call)
    return calls


def _json_values(text: str) -> Iterator[Any]:
    """Every top-level JSON object or array embedded in `text` (fences need no special case:
    the scan finds the value inside them)."""
    pos = 0
    while True:
        match = _OPENERS.search(text, pos)
        if match is None:
            return
        start = match.start()
        try:
            value, end = _decoder.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        yield value
        pos = end


def _candidates(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                yield item
    elif isinstance(value, dict):
        nested = value.get("tool_calls")
        if isinstance(nested, list):
            yield from _candidates(nested)
        else:
            yield value


def _as_call(obj: dict[str, Any], tool_names: Collection[str], index: int) -> ToolCall | None:
    fn = obj.get("function")
    if isinstance(fn, dict):  # {"function": {"name": ..., "arguments": ...}}
        obj = fn
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name not in tool_names:
        return None
    raw_args = next((obj[k] for k in _ARG_KEYS if k in obj), None)
    args, error, raw_text = parse_arguments(raw_args)
    return ToolCall(id=f"fallback_{index}", name=str(name), arguments=args,
                    arguments_error=error, raw_arguments=raw_text)
