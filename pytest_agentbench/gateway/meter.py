"""One attempt's model calls through the gateway: the budgets checked before forwarding, the
call forwarded through the model client, and recorded the way llm_v0 records its own calls.

Policy for what the agent asks (documented in docs and in `ModelGateway`'s docstring):

* the model: whatever name the agent asks for, the evaluated model answers; the names asked
  for are recorded (a `gateway_request` note per call, `requested_models`);
* sampling (`temperature`, `top_p`, `max_tokens`, `seed`, `stop`): the evaluated
  configuration's value wins; the agent's is used only where the configuration sets none, and
  every value of the agent's that was dropped is named in the call's note;
* `tool_choice`, `response_format`, `parallel_tool_calls` are forwarded; any other field is not,
  and is named in the note (`ignored`).

Calls of one attempt are forwarded one at a time, so the budgets hold exactly. Once a budget is
spent, the task's time runs out or the model fails for good, the attempt's `stop` is set and
every later call is refused before it reaches the model.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, Protocol

from pytest_agentbench.gateway import cassette
from pytest_agentbench.gateway.request import SAMPLING, ModelRequest
from pytest_agentbench.llm import (
    ChatParams,
    ChatResult,
    LLMAuthError,
    LLMBadResponse,
    LLMError,
    LLMRequestError,
    ModelClient,
)
from pytest_agentbench.llm.spend import Budgets, budget_over
from pytest_agentbench.schemas.events import Actor, Event, LLMRequest, LLMResponse, Note, utc_now
from pytest_agentbench.schemas.records import ModelInfo, Usage
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.text.redaction import Redactor

CHARS_PER_TOKEN = 4  # the same estimate llm_v0 makes of the next call's prompt
MIN_TASK_SEC = 1.0  # below this much task time left, no call is forwarded (as llm_v0)


class Events(Protocol):
    """The attempt's event log (agents.port.EventLog)."""

    def emit(self, event: Event, /, actor: Actor = "harness") -> str: ...


@dataclass(frozen=True)
class GatewayStop:
    """Why the gateway stopped forwarding: the attempt's outcome as llm_v0 would report it."""

    reason: Reason
    sub_reason: str | None
    summary: str


class Refused(Exception):
    """A call the gateway answers itself: `status`, a one-line message and an error code."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


class Meter:
    """The calls, spend and stop of one attempt; `call` is safe from several threads."""

    def __init__(self, client: ModelClient | None, params: ChatParams, model: ModelInfo,
                 limits: Budgets, deadline: float, events: Events,
                 redactors: Sequence[Redactor] = (), artifacts_dir: Path | None = None,
                 replay: cassette.CassettePlayer | None = None) -> None:
        self.client, self.params, self.model, self.limits = client, params, model, limits
        self.deadline, self.events = deadline, events
        self.redactors = list(redactors)
        self.usage = Usage()
        self.stop: GatewayStop | None = None
        self.requested_models: list[str] = []
        self.calls = 0  # forwarded, successful or not
        self.started = time.monotonic()
        self.last_cost: float | None = None
        self.last_wall_sec = 0.0
        self._lock = threading.Lock()
        self._log: IO[str] | None = None
        self._last_messages: list[dict[str, Any]] = []
        self.replay = replay  # answers from a cassette instead of the model
        self.recorder: cassette.CassetteRecorder | None = None
        if artifacts_dir is not None:
            artifacts_dir.mkdir(parents=True, exist_ok=True)
            self._log = (artifacts_dir / "model_calls.jsonl").open("a", encoding="utf-8")
            self.recorder = cassette.CassetteRecorder(artifacts_dir / cassette.CASSETTE_NAME)

    def close(self) -> None:
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None
            if self.recorder is not None:
                self.recorder.close()
                self.recorder = None
            if self.replay is not None and self.replay.left and self.stop is None:
                self.events.emit(Note(kind="cassette_unused", message=(
                    f"the agent ended with {self.replay.left} of the cassette's "
                    f"{len(self.replay.calls)} calls not asked for"), data={
                        "left": self.replay.left, "calls": len(self.replay.calls)}),
                    actor="llm")
                self.replay = None

    def call(self, request: ModelRequest) -> ChatResult:
        with self._lock:
            if self.stop is not None:
                raise Refused(403, f"agentbench gateway: this attempt's model calls are over "
                              f"({self.stop.reason}"
                              f"{' ' + self.stop.sub_reason if self.stop.sub_reason else ''}: "
                              f"{self.stop.summary})", "attempt_stopped")
            params, dropped = self._params(request)
            self._check_limits(request, params)
            self.calls += 1
            return self._forward(request, params, dropped)

    # -- policy ------------------------------------------------------------------------------
    def _params(self, request: ModelRequest) -> tuple[ChatParams, list[str]]:
        """The evaluated model's params, with the agent's sampling values where it sets none."""
        chosen: dict[str, Any] = {}
        dropped = []
        for name in SAMPLING:
            if name not in request.sampling:
                continue
            if getattr(self.params, name) is None:
                chosen[name] = request.sampling[name]
            else:
                dropped.append(name)
        deadline = self.deadline
        if self.limits.max_wall_sec is not None:
            deadline = min(deadline, self.started + self.limits.max_wall_sec)
        params = replace(self.params, **chosen, tool_choice=request.tool_choice,
                         extra_body={**self.params.extra_body, **request.extra},
                         deadline_monotonic=deadline)
        return params, dropped

    def _check_limits(self, request: ModelRequest, params: ChatParams) -> None:
        """Before each call, as llm_v0 checks: would the next call exceed a budget?"""
        b, u = self.limits, self.usage
        estimate = 0
        if b.max_tokens_total is not None:  # the estimate costs a serialization: only when asked
            chars = len(json.dumps(request.messages)) + len(json.dumps(request.tools or []))
            estimate = chars // CHARS_PER_TOKEN + (params.max_tokens or 0)
        over = budget_over(b, self.calls, u.total_tokens, estimate, u.cost_usd or 0.0,
                           self.last_cost, time.monotonic() - self.started, self.last_wall_sec)
        if over is not None:
            self._refuse(*over)
        if self.deadline - time.monotonic() <= MIN_TASK_SEC:
            self._end(GatewayStop(Reason.TIMEOUT, "TASK_BUDGET",
                                  "the task's time budget ran out"), 403, "task_timeout")

    def _refuse(self, kind: str, detail: str) -> None:
        self._end(GatewayStop(Reason.AGENT_GAVE_UP, f"BUDGET_{kind}", f"budget: {detail}"),
                  403, "budget_exhausted")

    def _end(self, stop: GatewayStop, status: int, code: str) -> None:
        self.stop = stop
        self.events.emit(Note(kind="gateway_stop", message=stop.summary[:500], data={
            "reason": stop.reason, "sub_reason": stop.sub_reason, "calls": self.calls,
            "status": status}), actor="llm")
        raise Refused(status, f"agentbench gateway: {stop.summary}", code)

    # -- forwarding and records --------------------------------------------------------------
    def _forward(self, request: ModelRequest, params: ChatParams,
                 dropped: list[str]) -> ChatResult:
        step = self.calls
        name = request.requested_model or ""
        if name and name not in self.requested_models:
            self.requested_models.append(name)
        self.events.emit(Note(kind="gateway_request", message=self._redact(
            f"{request.protocol} call {step}: {name or '(no model named)'} -> "
            f"{self.model.name}")[:500], data=self._redact({
                "step": step, "protocol": request.protocol, "requested_model": name or None,
                "model": self.model.name, "stream": request.stream,
                "dropped": dropped, "ignored": request.ignored})), actor="agent")
        prompt_sha = hashlib.sha256()
        for message in request.messages:
            text = json.dumps(message, sort_keys=True, ensure_ascii=False)
            prompt_sha.update(text.encode("utf-8", "surrogatepass") + b"\n")
        self.events.emit(LLMRequest(step=step, model=self.model.name,
                                    messages=len(request.messages),
                                    prompt_sha256=prompt_sha.hexdigest()), actor="llm")
        started = time.monotonic()
        normal = self._redact(cassette.normalised(request))
        try:
            if self.replay is not None:
                result = self.replay.answer(step, normal)
            else:
                assert self.client is not None, "a gateway without a model replays a cassette"
                result = self.client.chat(request.messages, request.tools, params)
        except cassette.CassetteDiverged as exc:
            self._end(GatewayStop(Reason.LLM_ERROR, "CASSETTE_DIVERGED", str(exc)), 502,
                      "cassette_diverged")
        except LLMError as exc:
            if self.recorder is not None:
                self.recorder.record(step, normal, error=self._redact(cassette.error_of(exc)))
            self.usage.retries += exc.retries
            self.usage.llm_latency_ms += int((time.monotonic() - started) * 1000)
            self._failed(exc, step, params)
        if self.recorder is not None:
            self.recorder.record(step, normal, answer=self._redact(cassette.answer_of(result)))
        self._account(result, step)
        self._write(step, request, result)
        return result

    def _failed(self, exc: LLMError, step: int, params: ChatParams) -> None:
        message = self._redact(f"{type(exc).__name__}: {exc}")
        self.events.emit(Note(kind="llm_error", message=message[:500],
                              data={"status": exc.status, "retries": exc.retries}), actor="llm")
        deadline = params.deadline_monotonic or self.deadline
        if time.monotonic() >= deadline - 0.5 and not isinstance(exc, LLMAuthError):
            if deadline < self.deadline:  # the wall budget, not the task, ran out
                self._refuse("WALL", f"max_wall_sec={self.limits.max_wall_sec} reached during "
                             "a model call")
            self._end(GatewayStop(Reason.TIMEOUT, "TASK_BUDGET", "the task's time budget ran "
                                  "out during a model call"), 504, "task_timeout")
        sub = ("AUTH" if isinstance(exc, LLMAuthError) else "BAD_REQUEST"
               if isinstance(exc, LLMRequestError) else "BAD_RESPONSE"
               if isinstance(exc, LLMBadResponse) else "RETRIES_EXHAUSTED")
        self._end(GatewayStop(Reason.LLM_ERROR, sub, f"model call failed at step {step}: "
                              f"{message}"), 502, "upstream_error")

    def _account(self, result: ChatResult, step: int) -> None:
        u, call = self.usage, result.usage
        u.llm_calls += 1
        u.prompt_tokens += call.prompt_tokens
        u.completion_tokens += call.completion_tokens
        u.total_tokens += call.total_tokens or call.prompt_tokens + call.completion_tokens
        u.retries += result.retries
        u.llm_latency_ms += result.wall_ms
        self.last_cost = call.cost_usd
        if call.cost_usd is not None:
            u.cost_usd = (u.cost_usd or 0.0) + call.cost_usd
        self.last_wall_sec = result.wall_ms / 1000
        self.events.emit(LLMResponse(
            step=step, finish_reason=result.finish_reason,
            tool_calls=[c.name for c in result.tool_calls],
            tool_calls_source=result.tool_calls_source, prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens, cost_usd=call.cost_usd,
            latency_ms=result.latency_ms, retries=result.retries), actor="llm")

    def _write(self, step: int, request: ModelRequest, result: ChatResult) -> None:
        """`model_calls.jsonl`: per call the messages new since the previous call (`prefix`
        says how many it shares with it) and the reply, redacted."""
        if self._log is None:
            return
        old, new = self._last_messages, request.messages
        prefix = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
                      min(len(old), len(new)))
        self._last_messages = list(new)
        line = {"step": step, "ts": utc_now(), "protocol": request.protocol,
                "requested_model": request.requested_model, "prefix": prefix,
                "messages": new[prefix:], "reply": result.assistant_message(),
                "usage": {"prompt_tokens": result.usage.prompt_tokens,
                          "completion_tokens": result.usage.completion_tokens,
                          "cost_usd": result.usage.cost_usd},
                "finish_reason": result.finish_reason, "model": result.model}
        self._log.write(json.dumps(self._redact(line), ensure_ascii=False, default=str) + "\n")
        self._log.flush()

    def _redact(self, obj: Any) -> Any:
        for redactor in self.redactors:
            obj = redactor.redact_obj(obj)
        return obj
