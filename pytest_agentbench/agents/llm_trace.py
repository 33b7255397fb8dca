"""What llm_v0 and the agents beside it (subagents) write about their model calls the same way:
the redacted conversation file, a call's meta line, and the client's retry events."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from pytest_agentbench.agents.port import EventLog
from pytest_agentbench.llm import ChatResult
from pytest_agentbench.schemas.events import LLMRetry
from pytest_agentbench.text.redaction import Redactor


class ConversationLog:
    """`<artifacts>/conversation.jsonl`, one JSON line per message or stop, redacted as written
    (flushed, so a killed attempt keeps what it said); no file when `artifacts_dir` is None."""

    def __init__(self, artifacts_dir: Path | None, redactors: list[Redactor]) -> None:
        self.redactors = redactors
        self.file: IO[str] | None = None
        if artifacts_dir is not None:
            Path(artifacts_dir).mkdir(parents=True, exist_ok=True)
            self.file = (Path(artifacts_dir) / "conversation.jsonl").open("a", encoding="utf-8")

    def redact(self, obj: Any) -> Any:
        for redactor in self.redactors:
            obj = redactor.redact_obj(obj)
        return obj

    def write(self, line: dict[str, Any]) -> None:
        if self.file is None:
            return
        self.file.write(json.dumps(self.redact(line), ensure_ascii=False, default=str) + "\n")
        self.file.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def call_meta(result: ChatResult) -> dict[str, Any]:
    """What the conversation file keeps beside a model's reply."""
    return {"usage": {"prompt_tokens": result.usage.prompt_tokens,
                      "completion_tokens": result.usage.completion_tokens,
                      "total_tokens": result.usage.total_tokens,
                      "cost_usd": result.usage.cost_usd},
            "latency_ms": result.latency_ms, "wall_ms": result.wall_ms,
            "retries": result.retries, "finish_reason": result.finish_reason,
            "tool_calls_source": result.tool_calls_source, "model": result.model,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments,
                            "arguments_error": c.arguments_error}
                           for c in result.tool_calls]}


def retry_events(events: EventLog, redact: Callable[[Any], Any],
                 ) -> Callable[[str, dict[str, Any]], None]:
    """The model client's `on_event`: each retry becomes an `llm_retry` event."""

    def on_event(kind: str, payload: dict[str, Any]) -> None:
        if kind == "llm_retry":
            events.emit(LLMRetry(attempt=payload.get("attempt", 0), status=payload.get("status"),
                                 wait_sec=float(payload.get("wait_sec") or 0.0),
                                 error=redact(str(payload.get("error", "")))), actor="llm")

    return on_event
