"""Structured answers from a model reply, however the model wrote them: a native call of the
role's answer tool, the same call written as JSON text (the client's fallback parser found it),
or the bare object in the text (fenced or not, prose around it). A patcher that writes its
diff in a ```diff fence instead of JSON is understood too."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from pytest_agentbench.llm import ChatResult

_MAX_SCAN = 200_000
_decoder = json.JSONDecoder()
_DIFF_FENCE = re.compile(r"```(?:diff|patch)[^\n]*\n(.*?)```", re.S)
_DIFF_START = re.compile(r"^(?:diff --git |--- )", re.M)


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every top-level JSON object in `text`, in order (objects inside arrays too)."""
    pos, text = 0, text[:_MAX_SCAN]
    while True:
        start = text.find("{", pos)
        if start < 0:
            return
        try:
            value, end = _decoder.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        if isinstance(value, dict):
            yield value
        pos = end


def answer_from(result: ChatResult, answer_tool: str, required: tuple[str, ...]
                ) -> dict[str, Any] | None:
    """The role's answer object in a reply, or None."""
    for call in result.tool_calls:
        if call.name == answer_tool and not call.arguments_error and _has(call.arguments,
                                                                           required):
            return call.arguments
    return answer_from_text(result.message.content or "", answer_tool, required)


def answer_from_text(text: str, answer_tool: str, required: tuple[str, ...]
                     ) -> dict[str, Any] | None:
    for obj in json_objects(text):
        inner = _call_arguments(obj, answer_tool)
        if inner is not None and _has(inner, required):
            return inner
        if _has(obj, required):
            return obj
    if "unified_diff" in required:
        diff = diff_in_text(text)
        if diff is not None:
            return {"unified_diff": diff, "summary": "diff written as text"}
    return None


def diff_in_text(text: str) -> str | None:
    """A unified diff in a ```diff fence, or starting a line of plain text."""
    fenced = _DIFF_FENCE.search(text)
    if fenced and "@@" in fenced.group(1):
        return fenced.group(1)
    start = _DIFF_START.search(text)
    if start and "+++ " in text[start.start():] and "@@" in text[start.start():]:
        return text[start.start():].split("```", 1)[0]
    return None


def _call_arguments(obj: dict[str, Any], answer_tool: str) -> dict[str, Any] | None:
    """`{"name": "<answer_tool>", "arguments": {...}}` (or an OpenAI call written out)."""
    fn = obj.get("function")
    if isinstance(fn, dict):
        obj = fn
    if obj.get("name") != answer_tool and obj.get("tool") != answer_tool:
        return None
    for key in ("arguments", "args", "parameters", "input"):
        value = obj.get(key)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return None
        if isinstance(value, dict):
            return value
    return None


def _has(obj: Any, required: tuple[str, ...]) -> bool:
    return isinstance(obj, dict) and all(obj.get(k) not in (None, "") for k in required)
