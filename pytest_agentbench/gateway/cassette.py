"""Recorded model traffic: a cassette is one attempt's model calls, as the
gateway forwarded them and as the model answered, so that the attempt can be replayed with no
model: the same requests in the same order get the same answers.

`cassette.jsonl` (in the attempt's `agent/` folder), one JSON line per call, redacted like every
file of the run:

    {"cassette": 1, "step": 3, "request_sha256": "...",      # of the whole normalised request
     "prefix": 4, "messages": [...],       # the messages new since the previous call's first
                                           # `prefix` (as model_calls.jsonl), so the file grows
                                           # with the conversation, not with its square
     "tools": [...],                       # only when they changed since the previous call
     "tool_choice": ..., "sampling": {...}, "extra": {...},
     "answer": {ChatResult} | "error": {"kind": "LLMRequestError", "message", "status", ...}}

The normalised request is what the agent asked for in the chat shape, whatever protocol it spoke:
its messages, tools, tool_choice, its own sampling values and forwarded fields. The model name it
asked for is not part of it, nor the evaluated model's settings (a replay has no model).

A replay compares each call with the cassette's call of the same step; the first that differs,
or a call beyond the cassette's last, raises `CassetteDiverged` with one line naming the call and
the first differing field. Text that differs from run to run whatever the agent does is masked
for the comparison only (`comparable`): runs of 12 or more hex digits (temporary file names,
commit ids), durations such as `0.03s` or `12 ms`, ISO timestamps. Imports neither pytest nor
docker."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import IO, Any

from pytest_agentbench.gateway.request import ModelRequest
from pytest_agentbench.llm import (
    AssistantMessage,
    ChatResult,
    LLMAuthError,
    LLMBadResponse,
    LLMError,
    LLMRequestError,
    LLMRetryExhausted,
    TokenUsage,
    ToolCall,
)

CASSETTE_NAME = "cassette.jsonl"
FORMAT = 1
_ERRORS: dict[str, type[LLMError]] = {cls.__name__: cls for cls in (
    LLMError, LLMAuthError, LLMRequestError, LLMBadResponse, LLMRetryExhausted)}
_SHOWN = 60  # characters of each side a divergence line shows
_VOLATILE = [
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
     "<TIME>"),
    (re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{12,}(?![0-9A-Za-z])"), "<HEX>"),
    (re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:s|ms|sec|seconds)\b"), "<DURATION>"),
]


class CassetteError(ValueError):
    """A cassette file that cannot be replayed: one line naming the file (and line)."""


class CassetteDiverged(Exception):
    """The replayed agent asked something the cassette does not hold (one line)."""


def normalised(request: ModelRequest) -> dict[str, Any]:
    return {"messages": request.messages, "tools": request.tools,
            "tool_choice": request.tool_choice, "sampling": request.sampling,
            "extra": request.extra}


def comparable(obj: Any) -> Any:
    """`obj` with the volatile text of every string masked (see the module docstring)."""
    if isinstance(obj, str):
        for pattern, mask in _VOLATILE:
            obj = pattern.sub(mask, obj)
        return obj
    if isinstance(obj, dict):
        return {k: comparable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [comparable(v) for v in obj]
    return obj


def request_sha256(normal: dict[str, Any]) -> str:
    """Of the request's comparable form: the same for two requests a replay accepts."""
    normal = comparable(normal)
    text = json.dumps(normal, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class CassetteRecorder:
    """Appends each call of an attempt to its cassette (flushed: a killed attempt keeps its
    calls so far). The caller passes the normalised request already redacted."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file: IO[str] | None = path.open("w", encoding="utf-8")
        self._messages: list[Any] = []
        self._tools: Any = ()  # never equal to a request's tools: the first line has them

    def record(self, step: int, normal: dict[str, Any], answer: dict[str, Any] | None = None,
               error: dict[str, Any] | None = None) -> None:
        if self._file is None:
            return
        old, new = self._messages, normal["messages"]
        prefix = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
                      min(len(old), len(new)))
        line: dict[str, Any] = {"cassette": FORMAT, "step": step,
                                "request_sha256": request_sha256(normal),
                                "prefix": prefix, "messages": new[prefix:]}
        if normal["tools"] != self._tools:
            line["tools"] = normal["tools"]
        line.update({k: normal[k] for k in ("tool_choice", "sampling", "extra")})
        line.update({"answer": answer} if error is None else {"error": error})
        self._messages, self._tools = list(new), normal["tools"]
        self._file.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def answer_of(result: ChatResult) -> dict[str, Any]:
    return result.to_dict()


def error_of(exc: LLMError) -> dict[str, Any]:
    return {"kind": type(exc).__name__, "message": str(exc), "status": exc.status,
            "retries": exc.retries}


class CassettePlayer:
    """Answers an attempt's calls from a cassette, in order (`answer`); `left` is how many of
    its calls were not asked for."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.calls: list[dict[str, Any]] = []
        self.used = 0
        try:
            lines = path.read_text("utf-8").splitlines()
        except OSError as exc:
            raise CassetteError(f"cassette {path}: cannot be read ({exc.strerror})") from None
        messages: list[Any] = []
        tools: Any = None
        for number, text in enumerate(lines, 1):
            if not text.strip():
                continue
            where = f"cassette {path} line {number}"
            try:
                line = json.loads(text)
            except ValueError:
                raise CassetteError(f"{where}: not JSON") from None
            if not isinstance(line, dict) or line.get("cassette") != FORMAT:
                raise CassetteError(f"{where}: not a cassette line (format {FORMAT})")
            prefix, new = line.get("prefix"), line.get("messages")
            if not isinstance(prefix, int) or not isinstance(new, list) or prefix > len(messages):
                raise CassetteError(f"{where}: prefix/messages do not follow the line before")
            if ("answer" in line) == ("error" in line):
                raise CassetteError(f"{where}: expected one of answer or error")
            messages = messages[:prefix] + new
            tools = line.get("tools", tools)
            request = {"messages": messages, "tools": tools,
                       **{k: line.get(k) for k in ("tool_choice", "sampling", "extra")}}
            self.calls.append({"request": request, "sha": line.get("request_sha256"),
                               "answer": line.get("answer"), "error": line.get("error")})

    @property
    def left(self) -> int:
        return len(self.calls) - self.used

    def answer(self, step: int, normal: dict[str, Any]) -> ChatResult:
        """The recorded answer to call `step` (1-based), or raise: CassetteDiverged when the
        request is not the recorded one, the recorded LLMError when the model had failed."""
        if step > len(self.calls):
            raise CassetteDiverged(f"cassette diverged at call {step}: the cassette holds "
                                   f"{len(self.calls)} calls ({self.path})")
        call = self.calls[step - 1]
        self.used = step
        if request_sha256(normal) != call["sha"]:
            where = first_difference(comparable(call["request"]), comparable(normal))
            raise CassetteDiverged(f"cassette diverged at call {step}: {where}")
        if call["error"] is not None:
            error = call["error"]
            kind = _ERRORS.get(str(error.get("kind")), LLMError)
            raise kind(str(error.get("message", "")), status=error.get("status"),
                       retries=int(error.get("retries") or 0))
        try:
            return _result(call["answer"])
        except (TypeError, KeyError, AttributeError) as exc:
            raise CassetteError(f"cassette {self.path} call {step}: the answer cannot be read "
                                f"({exc})") from None


def _result(data: dict[str, Any]) -> ChatResult:
    message = dict(data["message"])
    calls = [ToolCall(**c) for c in message.pop("tool_calls", [])]
    return ChatResult(**{**data, "message": AssistantMessage(**message, tool_calls=calls),
                         "usage": TokenUsage(**data["usage"])})


def first_difference(recorded: Any, now: Any, where: str = "") -> str:
    """`messages[4].content: recorded '...', now '...'` (the first place the two differ)."""
    if isinstance(recorded, dict) and isinstance(now, dict):
        for key in [*recorded, *(k for k in now if k not in recorded)]:
            if recorded.get(key) != now.get(key):
                return first_difference(recorded.get(key), now.get(key),
                                        f"{where}.{key}" if where else str(key))
    if isinstance(recorded, list) and isinstance(now, list):
        for index, (a, b) in enumerate(zip(recorded, now, strict=False)):
            if a != b:
                return first_difference(a, b, f"{where}[{index}]")
        if len(recorded) != len(now):
            return f"{where}: recorded {len(recorded)} items, now {len(now)}"
    start = 0
    if isinstance(recorded, str) and isinstance(now, str):  # show where the texts part
        start = next((i for i, (a, b) in enumerate(zip(recorded, now, strict=False)) if a != b),
                     min(len(recorded), len(now)))
        start = max(0, start - _SHOWN // 3)
    return (f"{where or 'request'}: recorded {_show(recorded, start)}, "
            f"now {_show(now, start)}")


def _show(value: Any, start: int = 0) -> str:
    text = json.dumps(value[start:] if isinstance(value, str) else value, ensure_ascii=False,
                      default=str)
    text = text if len(text) <= _SHOWN else text[:_SHOWN] + "…"
    return "…" + text if start else text
