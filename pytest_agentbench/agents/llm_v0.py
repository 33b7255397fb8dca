"""llm_v0: the baseline LLM agent. One loop: observation → model → tool calls → observations → ...

The model is called on the host (the sandbox never sees the API key); tools run through
`ctx.toolbox`. Before every model call the budgets are checked (steps, total tokens, cost, wall
time, the task deadline) against what the next call would spend. The loop stops when the model
calls `finish`, or on a stop condition:

    max_steps (model turns)                      AGENT_GAVE_UP      MAX_STEPS
    a budget would be exceeded                   AGENT_GAVE_UP      BUDGET_<STEPS|TOKENS|COST|WALL>
    the task deadline                            TIMEOUT            TASK_BUDGET
    the test-output signature unchanged for      AGENT_STUCK
      `stuck_after` test runs in a row
    `max_patch_rejections` rejected patches      TOOL_ERROR         PATCH_REJECTED
      in a row (a successful patch resets it)
    `max_noop` turns without a usable tool call  AGENT_NO_PROGRESS
      or edits that changed nothing, in a row
      (an edit that changes a file resets it)
    the same tool call failing the same way      AGENT_NO_PROGRESS  REPEATED_TOOL_ERROR
      `max_repeated_errors` times in a row
    `finish` while the failing command still     AGENT_GAVE_UP      UNVERIFIED_FINISH
      fails, after `max_unverified_finish`
      refusals

`finish` is not taken at its word (`verify_finish`): the failing command runs through the toolbox
(recorded like any call; it does not feed the stuck counter) and while it fails the finish is
refused, the model gets the output's tail and goes on. A passing run of exactly that command by the
model, with nothing run or edited since, is check enough. With under `MIN_VERIFY_SEC` left the
finish stands unchecked (the grading runs anyway). A reply with code in a fenced block and no tool
call gets, once per run, a nudge toward apply_patch/write_file (`prose_code_nudge`); later
prose-only replies get the plain no-tool-call nudge. Each of these is a `note` event
(finish_verified, finish_unverified, finish_refused, prose_code_nudge).

A model failure that survives the client's retries raises `AgentError(LLM_ERROR)` (an ERROR, not
the agent's fault); the exception carries `usage` and `model` for the record. Every message goes,
redacted, to `<artifacts>/conversation.jsonl` as it happens.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any, NoReturn

from pytest_agentbench.agents.llm_config import LLMAgentConfig
from pytest_agentbench.agents.llm_finish import FinishCheck
from pytest_agentbench.agents.llm_messages import CUT_OFF, NO_TOOL_CALL, code_blocks, code_nudge
from pytest_agentbench.agents.llm_trace import ConversationLog, call_meta, retry_events
from pytest_agentbench.agents.port import AgentContext, AgentError, AgentOutcome, attach_spend
from pytest_agentbench.agents.repeats import REPEATED_TOOL_ERROR, RepeatedFailures
from pytest_agentbench.agents.statement import task_statement
from pytest_agentbench.llm import (
    ChatResult,
    LLMAuthError,
    LLMBadResponse,
    LLMError,
    LLMRequestError,
    ModelConfigError,
    ToolCall,
)
from pytest_agentbench.llm.spend import budget_over
from pytest_agentbench.schemas.events import (
    AgentTurn,
    LLMRequest,
    LLMResponse,
    Note,
    utc_now,
)
from pytest_agentbench.schemas.records import ModelInfo, Usage
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.text.redaction import Redactor
from pytest_agentbench.text.signatures import signature
from pytest_agentbench.text.truncation import truncate
from pytest_agentbench.tools.results import ToolResult
from pytest_agentbench.tools.tool_schemas import TOOL_SCHEMAS, WRITE_TOOLS

EDIT_TOOLS = frozenset({"apply_patch", "write_file", "remove_file"})
KNOWN_TOOLS = frozenset(s["function"]["name"] for s in TOOL_SCHEMAS)
CHARS_PER_TOKEN = 4
_TEST_RUNNER = re.compile(r"\bpytest\b")
_SPACES = re.compile(r"\s+")


class LLMAgent:
    """Made per attempt by `agents.variants.agent_builder` with its configuration, resolved once
    per run; `redactor` knows the run's secrets, `transport` is an httpx transport for tests."""

    name = "llm_v0"
    uses_llm_config = True  # agents.variants resolves an LLMAgentConfig for it (and subclasses)

    def __init__(self, config: LLMAgentConfig, *, redactor: Redactor | None = None,
                 transport: Any = None) -> None:
        self.config, self.redactor, self.transport = config, redactor, transport

    def run(self, ctx: AgentContext) -> AgentOutcome:
        return self.run_state(ctx, self.config, self.redactor, self.transport).loop()

    @property
    def run_state(self) -> type[_Run]:
        """The class holding one run's state; a variant built on llm_v0 returns a subclass."""
        return _Run


class _Stop(Exception):
    def __init__(self, outcome: AgentOutcome) -> None:
        self.outcome = outcome


class _Run:
    """The state of one agent run (split from LLMAgent so the agent itself stays stateless)."""

    agent_name = "llm_v0"  # in conversation.jsonl's meta line; a subclass names its agent

    def __init__(self, ctx: AgentContext, config: LLMAgentConfig, redactor: Redactor | None,
                 transport: Any) -> None:
        self.ctx, self.cfg, self.budget = ctx, config.params, config.budget
        caps = [n for n in (ctx.max_steps, self.cfg.max_steps) if isinstance(n, int) and n > 0]
        self.max_steps = min(caps) if caps else 30
        self.resolved, self.prompt = config.model, config.prompt
        redactors = [r for r in (redactor,) if r is not None]
        redactors.append(Redactor(env_names=self.resolved.key_env_names()))
        self.log = ConversationLog(ctx.artifacts_dir, redactors)
        self._redact, self._write = self.log.redact, self.log.write
        try:
            self.client = self.resolved.make_client(
                on_event=retry_events(ctx.events, self._redact), transport=transport)
        except ModelConfigError as exc:  # the key went away since the run started
            self.log.close()
            raise AgentError(Reason.LLM_ERROR, f"model configuration: {exc}",
                             "MODEL_CONFIG") from exc
        self.model_info = ModelInfo(**self._redact(self.resolved.model_info()),
                                    prompt_version=config.prompt_version)
        self.tools = [s for s in TOOL_SCHEMAS if ctx.task.agent.allow_file_write
                      or s["function"]["name"] not in WRITE_TOOLS]
        self.tools_chars = len(json.dumps(self.tools))
        self.messages: list[dict[str, Any]] = []
        self.prompt_chars = 0
        self.prompt_hash = hashlib.sha256()
        self.usage = Usage()
        self.last_cost: float | None = None
        self.last_wall_sec = 0.0
        self.step = 0
        self.started = time.monotonic()
        self.last_sig: list[str] | None = signature(1, ctx.failing_output, "")
        self.unchanged = self.rejections = self.noop = 0
        self.repeats = RepeatedFailures()
        self.test_commands = [_norm(c) for c in (ctx.failing_command,
                                                 ctx.task.validation.passing_command)]
        self.finish_check = FinishCheck(ctx, self.cfg, self._note, self._offers("write_file"))
        self.code_nudged = False
        self.clean_pass = False  # the model's last run/edit: a passing run of the failing command

    # -- the loop ---------------------------------------------------------------------------
    def loop(self) -> AgentOutcome:
        try:
            self._write({"meta": {"agent": self.agent_name, "model": self.model_info.model_dump(),
                                  "tools": [s["function"]["name"] for s in self.tools]}})
            self._append({"role": "system", "content": self.prompt})
            self._append({"role": "user", "content": self._first_observation()})
            while True:
                self._check_limits()
                self._turn(self._call_model())
        except _Stop as stop:
            return self._finish(stop.outcome)
        except Exception as exc:  # a tool call's sandbox went away, ...: the record keeps the cost
            attach_spend(exc, self.usage, self.model_info)
            raise
        finally:
            self.client.close()
            self.log.close()

    def _call_model(self) -> ChatResult:
        self.step += 1
        events = self.ctx.events
        events.emit(AgentTurn(step=self.step), actor="agent")
        events.emit(LLMRequest(step=self.step, model=self.model_info.name,
                               messages=len(self.messages),
                               prompt_sha256=self.prompt_hash.copy().hexdigest()), actor="llm")
        deadline = self.ctx.deadline
        if self.budget.max_wall_sec is not None:
            deadline = min(deadline, self.started + self.budget.max_wall_sec)
        started = time.monotonic()
        try:
            result = self.client.chat(self.messages, self.tools,
                                      self.resolved.chat_params(deadline_monotonic=deadline))
        except LLMError as exc:
            self.usage.retries += exc.retries
            self.usage.llm_latency_ms += int((time.monotonic() - started) * 1000)
            self._on_llm_error(exc, deadline)
        self._account(result)
        return result

    def _turn(self, result: ChatResult) -> None:
        self._append(result.assistant_message(), call_meta(result))
        calls = result.tool_calls
        native = result.tool_calls_source == "native"
        usable = False
        texts: list[str] = []
        for call in calls:
            observation, executed, finished = self._execute(call)
            usable = usable or executed
            if native:
                self._append({"role": "tool", "tool_call_id": call.id, "content": observation})
            else:
                texts.append(f"[{call.name}] result:\n{observation}")
            if finished is not None:
                raise _Stop(finished)
        if texts:
            self._append({"role": "user", "content": "\n\n".join(texts)})
        if not usable:
            self.noop += 1
            if not calls:
                self._append({"role": "user", "content": self._nudge(result)})
        self._check_progress()

    def _execute(self, call: ToolCall) -> tuple[str, bool, AgentOutcome | None]:
        """(observation, whether the toolbox ran it, the outcome when it was `finish`); the
        call's failure counted for the repeated-error stop."""
        observation, executed, finished, error = self._run_call(call)
        arguments = call.raw_arguments if call.arguments_error else call.arguments
        self.repeats.see(call.name or "", arguments, error)
        return observation, executed, finished

    def _run_call(self, call: ToolCall) -> tuple[str, bool, AgentOutcome | None, str | None]:
        if call.arguments_error:
            raw = call.raw_arguments[:500]
            return (f"ERROR INVALID_ARGUMENTS: {call.name or '(no name)'}: {call.arguments_error}"
                    f"\nraw arguments: {raw}\nSend the arguments as one JSON object that matches "
                    "the tool's schema.", False, None, "INVALID_ARGUMENTS")
        if call.name not in KNOWN_TOOLS:
            offered = ", ".join(s["function"]["name"] for s in self.tools)
            text = f"ERROR UNKNOWN_TOOL: no tool {call.name!r}; the tools are: {offered}"
            return text, False, None, "UNKNOWN_TOOL"
        result = self.ctx.toolbox.call(call.name, call.arguments)
        error = None if result.ok else result.error_type  # a failing test run is no error
        if call.name == "finish" and result.ok:
            summary = str(call.arguments.get("summary", ""))
            refusal, stop = self.finish_check.check(self.clean_pass)
            if refusal is not None:
                return refusal, True, stop, None
            return ("finished", True,
                    AgentOutcome("finish", summary=self._redact(summary)[:2000]), None)
        self._track(call, result)
        text = truncate(result.to_observation(), head_lines=300, tail_lines=200,
                        max_bytes=self.cfg.observation_chars).text
        return text, True, None, error

    def _track(self, call: ToolCall, result: ToolResult) -> None:
        """Feed the stop conditions from one tool result."""
        if call.name == "apply_patch":
            self.rejections = self.rejections + 1 if result.error_type == "PATCH_REJECTED" else 0
        if call.name in EDIT_TOOLS and result.ok:
            self.noop = 0 if result.changed_files else self.noop + 1
        if call.name in EDIT_TOOLS or call.name == "run":
            self.clean_pass = (call.name == "run" and result.exit_code == 0
                               and not call.arguments.get("env")
                               and _norm(str(call.arguments.get("command", "")))
                               == _norm(self.ctx.failing_command))
        if call.name == "run" and result.exit_code is not None and self._counts_for_stuck(call):
            sig = signature(result.exit_code, result.stdout, result.stderr)
            self.unchanged = self.unchanged + 1 if sig == self.last_sig else 0
            self.last_sig = sig

    def _counts_for_stuck(self, call: ToolCall) -> bool:
        if self.cfg.stuck_on == "all":
            return True
        command = _norm(str(call.arguments.get("command", "")))
        return any(c in command for c in self.test_commands) or bool(_TEST_RUNNER.search(command))

    def _offers(self, tool: str) -> bool:
        return any(s["function"]["name"] == tool for s in self.tools)

    def _note(self, kind: str, message: str, data: dict[str, Any]) -> None:
        self.ctx.events.emit(Note(kind=kind, message=self._redact(message)[:500],
                                  data=self._redact({"step": self.step, **data})), actor="agent")

    # -- stop conditions --------------------------------------------------------------------
    def _check_progress(self) -> None:
        cfg = self.cfg
        if self.rejections >= cfg.max_patch_rejections:
            self._stop("patch_rejected", Reason.TOOL_ERROR, "PATCH_REJECTED",
                       f"{self.rejections} patches rejected in a row")
        if self.unchanged >= cfg.stuck_after:
            self._stop("stuck", Reason.AGENT_STUCK, None, f"test output unchanged for "
                       f"{self.unchanged} runs in a row: {', '.join((self.last_sig or [])[:3])}")
        if self.repeats.count >= cfg.max_repeated_errors:
            self._stop("repeated_error", Reason.AGENT_NO_PROGRESS, REPEATED_TOOL_ERROR,
                       self.repeats.summary())
        if self.noop >= cfg.max_noop:
            self._stop("no_progress", Reason.AGENT_NO_PROGRESS, None,
                       f"{self.noop} turns/edits in a row changed nothing")

    def _check_limits(self) -> None:
        """Before each model call: would the next call exceed a limit?"""
        b, u, done = self.budget, self.usage, self.step
        if done >= self.max_steps:
            self._stop("max_steps", Reason.AGENT_GAVE_UP, "MAX_STEPS",
                       f"reached max_steps={self.max_steps} without finishing")
        estimate = ((self.prompt_chars + self.tools_chars) // CHARS_PER_TOKEN
                    + (self.resolved.values.get("max_tokens") or 0))
        over = budget_over(b, done, u.total_tokens, estimate, u.cost_usd or 0.0, self.last_cost,
                           time.monotonic() - self.started, self.last_wall_sec)
        if over is not None:
            self._budget(*over)
        if self.ctx.remaining() <= 1.0:
            self._stop("budget", Reason.TIMEOUT, "TASK_BUDGET", "the task's time budget ran out")

    def _budget(self, kind: str, detail: str) -> NoReturn:
        self._stop("budget", Reason.AGENT_GAVE_UP, f"BUDGET_{kind}", f"budget: {detail}")

    def _stop(self, finished_by: str, reason: Reason, sub: str | None, summary: str) -> NoReturn:
        raise _Stop(AgentOutcome(finished_by, reason, sub, summary))

    def _on_llm_error(self, exc: LLMError, deadline: float) -> NoReturn:
        message = self._redact(f"{type(exc).__name__}: {exc}")
        self._write({"step": self.step, "ts": utc_now(), "error": message, "status": exc.status,
                     "retries": exc.retries})
        self.ctx.events.emit(Note(kind="llm_error", message=message,
                                  data={"status": exc.status, "retries": exc.retries}),
                             actor="llm")
        if time.monotonic() >= deadline - 0.5 and not isinstance(exc, LLMAuthError):
            if deadline < self.ctx.deadline:  # the wall budget, not the task, ran out
                self._budget("WALL", f"max_wall_sec={self.budget.max_wall_sec} reached "
                             "during a model call")
            self._stop("budget", Reason.TIMEOUT, "TASK_BUDGET",
                       "the task's time budget ran out during a model call")
        sub = ("AUTH" if isinstance(exc, LLMAuthError) else "BAD_REQUEST"
               if isinstance(exc, LLMRequestError) else "BAD_RESPONSE"
               if isinstance(exc, LLMBadResponse) else "RETRIES_EXHAUSTED")
        raise AgentError(Reason.LLM_ERROR, f"model call failed at step {self.step}: {message}",
                         sub, usage=self.usage, model=self.model_info) from None

    def _finish(self, outcome: AgentOutcome) -> AgentOutcome:
        outcome.model, outcome.usage, outcome.steps = self.model_info, self.usage, self.step
        self.ctx.events.emit(Note(
            kind="agent_stop", message=f"{outcome.finished_by}: {outcome.summary}"[:500],
            data={"reason": outcome.reason, "sub_reason": outcome.sub_reason, "steps": self.step,
                  "usage": self.usage.model_dump()}), actor="agent")
        self._write({"step": self.step, "ts": utc_now(), "stop": {
            "finished_by": outcome.finished_by, "reason": outcome.reason,
            "sub_reason": outcome.sub_reason, "summary": outcome.summary}})
        return outcome

    # -- accounting, messages, events -------------------------------------------------------
    def _account(self, result: ChatResult) -> None:
        u, call = self.usage, result.usage
        u.llm_calls += 1
        u.prompt_tokens += call.prompt_tokens
        u.completion_tokens += call.completion_tokens
        u.total_tokens += call.total_tokens or call.prompt_tokens + call.completion_tokens
        u.retries += result.retries
        u.llm_latency_ms += result.wall_ms
        if result.tool_calls_source == "fallback_json":
            u.fallback_tool_calls += len(result.tool_calls)
        self.last_cost = call.cost_usd
        if call.cost_usd is not None:
            u.cost_usd = (u.cost_usd or 0.0) + call.cost_usd
        self.last_wall_sec = result.wall_ms / 1000
        self.ctx.events.emit(LLMResponse(
            step=self.step, finish_reason=result.finish_reason,
            tool_calls=[c.name for c in result.tool_calls],
            tool_calls_source=result.tool_calls_source, prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens, cost_usd=call.cost_usd,
            latency_ms=result.latency_ms, retries=result.retries), actor="llm")

    def _append(self, message: dict[str, Any], meta: dict[str, Any] | None = None) -> None:
        text = json.dumps(message, sort_keys=True, ensure_ascii=False)
        self.messages.append(message)
        self.prompt_chars += len(text)
        self.prompt_hash.update(text.encode("utf-8", "surrogatepass") + b"\n")
        self._write({"step": self.step, "ts": utc_now(), "message": message, **(meta or {})})

    def _first_observation(self) -> str:
        return task_statement(self.ctx, self.cfg.failing_output_chars,
                              "Fix the code so that it passes, verify by running it, then call "
                              "finish.")

    def _nudge(self, result: ChatResult) -> str:
        if result.finish_reason == "length":
            return CUT_OFF
        if self.cfg.prose_code_nudge and not self.code_nudged:
            blocks = code_blocks(result.message.content or "")
            if blocks:
                self.code_nudged = True
                text, data = code_nudge(blocks, self._offers("write_file"))
                self._note("prose_code_nudge", f"{len(blocks)} code block(s) in prose, no tool "
                           "call", data)
                return text
        return NO_TOOL_CALL


def _norm(command: str) -> str:
    return _SPACES.sub(" ", command).strip()
