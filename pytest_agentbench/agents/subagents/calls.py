"""Model calls for every role, with llm_v0's checks before each call (steps, total tokens,
cost, wall time, the task deadline) plus the role's own share of the token budget; usage is
counted in total and per role, and every message goes, redacted and tagged with its role and
span, to `<artifacts>/conversation.jsonl`."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pytest_agentbench.agents.llm_config import LLMAgentConfig
from pytest_agentbench.agents.llm_trace import ConversationLog, call_meta, retry_events
from pytest_agentbench.agents.port import AgentContext, AgentError, AgentOutcome
from pytest_agentbench.agents.subagents.graph import Node, emit_in_span
from pytest_agentbench.llm import (
    ChatResult,
    LLMAuthError,
    LLMBadResponse,
    LLMError,
    LLMRequestError,
    ModelConfigError,
)
from pytest_agentbench.llm.spend import budget_over
from pytest_agentbench.schemas.events import (
    AgentTurn,
    LLMRequest,
    LLMResponse,
    Note,
    utc_now,
)
from pytest_agentbench.schemas.records import ModelInfo, RoleUsage, Usage
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.text.redaction import Redactor

CHARS_PER_TOKEN = 4  # the estimate llm_v0 uses for the next call's prompt


class Stop(Exception):
    """Ends the run with this outcome."""

    def __init__(self, outcome: AgentOutcome) -> None:
        self.outcome = outcome


class RoleBudgetExhausted(Exception):
    """The role's share of the token budget would be exceeded by its next call."""

    def __init__(self, role: str, detail: str) -> None:
        super().__init__(detail)
        self.role = role


def stop(finished_by: str, reason: Reason, sub: str | None, summary: str) -> NoReturn:
    raise Stop(AgentOutcome(finished_by, reason, sub, summary))


def budget_stop(kind: str, detail: str) -> NoReturn:
    stop("budget", Reason.AGENT_GAVE_UP, f"BUDGET_{kind}", f"budget: {detail}")


@dataclass
class Thread:
    """One role's conversation within one span (a router decision or a delegation)."""

    role: str
    node: Node
    messages: list[dict[str, Any]] = field(default_factory=list)
    chars: int = 0


class ModelCaller:
    def __init__(self, ctx: AgentContext, config: LLMAgentConfig, shares: dict[str, float],
                 prompt_version: str, redactor: Redactor | None, transport: Any,
                 agent_name: str) -> None:
        self.ctx, self.budget, self.shares = ctx, config.budget, shares
        caps = [n for n in (ctx.max_steps, config.params.max_steps)
                if isinstance(n, int) and n > 0]
        self.max_steps = min(caps) if caps else 30
        self.resolved = config.model
        redactors = [r for r in (redactor,) if r is not None]
        redactors.append(Redactor(env_names=self.resolved.key_env_names()))
        self.log = ConversationLog(ctx.artifacts_dir, redactors)
        self.redact, self.write = self.log.redact, self.log.write
        try:
            self.client = self.resolved.make_client(
                on_event=retry_events(ctx.events, self.redact), transport=transport)
        except ModelConfigError as exc:
            self.log.close()
            raise AgentError(Reason.LLM_ERROR, f"model configuration: {exc}",
                             "MODEL_CONFIG") from exc
        self.model_info = ModelInfo(**self.redact(self.resolved.model_info()),
                                    prompt_version=prompt_version)
        self.usage = Usage()
        self.step = 0
        self.started = time.monotonic()
        self.last_cost: float | None = None
        self.last_wall_sec = 0.0
        self.agent_name = agent_name

    def close(self) -> None:
        self.client.close()
        self.log.close()

    # -- one call ---------------------------------------------------------------------------
    def call(self, thread: Thread, tools: list[dict[str, Any]]) -> ChatResult:
        """Check the limits, call the model with the thread, count it, append the reply."""
        self.check_limits(thread, tools)
        self.step += 1
        span = thread.node.id
        emit_in_span(self.ctx.events, AgentTurn(step=self.step), span)
        sha = hashlib.sha256("\n".join(json.dumps(m, sort_keys=True, ensure_ascii=False)
                                       for m in thread.messages).encode("utf-8",
                                                                        "surrogatepass"))
        emit_in_span(self.ctx.events, LLMRequest(
            step=self.step, model=self.model_info.name, messages=len(thread.messages),
            prompt_sha256=sha.hexdigest()), span, actor="llm")
        deadline = self.ctx.deadline
        if self.budget.max_wall_sec is not None:
            deadline = min(deadline, self.started + self.budget.max_wall_sec)
        started = time.monotonic()
        try:
            result = self.client.chat(thread.messages, tools,
                                      self.resolved.chat_params(deadline_monotonic=deadline))
        except LLMError as exc:
            self.usage.retries += exc.retries
            self.usage.llm_latency_ms += int((time.monotonic() - started) * 1000)
            self._on_llm_error(exc, deadline, thread)
        self._account(result, thread)
        self.append(thread, result.assistant_message(), call_meta(result))
        return result

    def estimate(self, thread: Thread, tools: list[dict[str, Any]]) -> int:
        """Tokens the next call may spend: its prompt at 4 characters a token, plus the
        completion's cap."""
        return ((thread.chars + len(json.dumps(tools))) // CHARS_PER_TOKEN
                + (self.resolved.values.get("max_tokens") or 0))

    def check_limits(self, thread: Thread, tools: list[dict[str, Any]]) -> None:
        b, u, done = self.budget, self.usage, self.step
        if done >= self.max_steps:
            stop("max_steps", Reason.AGENT_GAVE_UP, "MAX_STEPS",
                 f"reached max_steps={self.max_steps} model calls without finishing")
        estimate = self.estimate(thread, tools) if b.max_tokens_total is not None else 0
        over = budget_over(b, done, u.total_tokens, estimate, u.cost_usd or 0.0, self.last_cost,
                           time.monotonic() - self.started, self.last_wall_sec)
        if over is not None:
            self._budget(*over)
        if b.max_tokens_total is not None:  # the role's share of the token budget
            share = self.shares.get(thread.role, 0.0)
            cap = int(share * b.max_tokens_total)
            spent_by_role = self.usage.by_role.get(thread.role)
            used = spent_by_role.total_tokens if spent_by_role else 0
            if used + estimate > cap:
                raise RoleBudgetExhausted(thread.role, (
                    f"{thread.role}: {used} tokens used + ~{estimate} for the next call > its "
                    f"share {share:g} of max_tokens_total={b.max_tokens_total} ({cap})"))
        if self.ctx.remaining() <= 1.0:
            stop("budget", Reason.TIMEOUT, "TASK_BUDGET", "the task's time budget ran out")

    def _budget(self, kind: str, detail: str) -> NoReturn:
        budget_stop(kind, detail)

    def _on_llm_error(self, exc: LLMError, deadline: float, thread: Thread) -> NoReturn:
        message = self.redact(f"{type(exc).__name__}: {exc}")
        self.write({"step": self.step, "ts": utc_now(), "role": thread.role,
                    "span": thread.node.id, "error": message, "status": exc.status,
                    "retries": exc.retries})
        emit_in_span(self.ctx.events, Note(kind="llm_error", message=message, data={
            "status": exc.status, "retries": exc.retries, "role": thread.role}),
            thread.node.id, actor="llm")
        if time.monotonic() >= deadline - 0.5 and not isinstance(exc, LLMAuthError):
            if deadline < self.ctx.deadline:
                self._budget("WALL", f"max_wall_sec={self.budget.max_wall_sec} reached "
                             "during a model call")
            stop("budget", Reason.TIMEOUT, "TASK_BUDGET",
                 "the task's time budget ran out during a model call")
        sub = ("AUTH" if isinstance(exc, LLMAuthError) else "BAD_REQUEST"
               if isinstance(exc, LLMRequestError) else "BAD_RESPONSE"
               if isinstance(exc, LLMBadResponse) else "RETRIES_EXHAUSTED")
        raise AgentError(Reason.LLM_ERROR, f"model call failed at step {self.step} "
                         f"({thread.role}): {message}", sub, usage=self.usage,
                         model=self.model_info) from None

    # -- accounting -------------------------------------------------------------------------
    def role_usage(self, role: str) -> RoleUsage:
        return self.usage.by_role.setdefault(role, RoleUsage())

    def _account(self, result: ChatResult, thread: Thread) -> None:
        call, total = result.usage, result.usage.total_tokens or (
            result.usage.prompt_tokens + result.usage.completion_tokens)
        for u in (self.usage, self.role_usage(thread.role)):
            u.llm_calls += 1
            u.prompt_tokens += call.prompt_tokens
            u.completion_tokens += call.completion_tokens
            u.total_tokens += total
            if call.cost_usd is not None:
                u.cost_usd = (u.cost_usd or 0.0) + call.cost_usd
        self.usage.retries += result.retries
        self.usage.llm_latency_ms += result.wall_ms
        if result.tool_calls_source == "fallback_json":
            self.usage.fallback_tool_calls += len(result.tool_calls)
        node = thread.node
        node.calls += 1
        node.prompt_tokens += call.prompt_tokens
        node.completion_tokens += call.completion_tokens
        self.last_cost = call.cost_usd
        self.last_wall_sec = result.wall_ms / 1000
        emit_in_span(self.ctx.events, LLMResponse(
            step=self.step, finish_reason=result.finish_reason,
            tool_calls=[c.name for c in result.tool_calls],
            tool_calls_source=result.tool_calls_source, prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens, cost_usd=call.cost_usd,
            latency_ms=result.latency_ms, retries=result.retries), node.id, actor="llm")

    # -- the conversation file --------------------------------------------------------------
    def append(self, thread: Thread, message: dict[str, Any],
               meta: dict[str, Any] | None = None) -> None:
        thread.messages.append(message)
        thread.chars += len(json.dumps(message, sort_keys=True, ensure_ascii=False))
        self.write({"step": self.step, "ts": utc_now(), "role": thread.role,
                    "span": thread.node.id, "message": message, **(meta or {})})
