"""SubagentsAgent: rounds of router decision → specialist delegation, until a verified finish
or a stop condition.

Stop conditions (codes as llm_v0's):
    model calls reach max_steps                   AGENT_GAVE_UP   MAX_STEPS
    a budget would be exceeded (checked before    AGENT_GAVE_UP   BUDGET_<STEPS|TOKENS|COST|WALL>
      every call; the router's token share too)
    the task deadline                             TIMEOUT         TASK_BUDGET
    the router gives up                           AGENT_GAVE_UP   ROUTER_GAVE_UP
    `max_verify_failures` refused done/finish     AGENT_GAVE_UP   UNVERIFIED_FINISH
    `max_patch_rejections` rejected patches       TOOL_ERROR      PATCH_REJECTED
      in a row
    `stuck_after` checks with an unchanged        AGENT_STUCK
      failure signature in a row
    `max_noop` rounds in a row that changed       AGENT_NO_PROGRESS
      nothing (no usable decision, or a failed
      delegation)

A tester's "done" and a router's "finish" are not taken at their word: the harness runs the
failing command through the toolbox, and only when it passes calls `finish`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from pytest_agentbench.agents.llm_config import LLMAgentConfig, load_prompt
from pytest_agentbench.agents.port import AgentContext, AgentError, AgentOutcome, attach_spend
from pytest_agentbench.agents.subagents.calls import (
    ModelCaller,
    RoleBudgetExhausted,
    Stop,
    budget_stop,
    stop,
)
from pytest_agentbench.agents.subagents.graph import DelegationGraph, Node
from pytest_agentbench.agents.subagents.roles import (
    PATCHER,
    ROLES,
    ROUTER,
    SEARCHER,
    TESTER,
    SubagentParams,
)
from pytest_agentbench.agents.subagents.router import RouterDecision, decide
from pytest_agentbench.agents.subagents.specialists import Delegation, Specialist, SpecialistLimits
from pytest_agentbench.agents.subagents.state import State
from pytest_agentbench.llm import ModelConfigError
from pytest_agentbench.schemas.events import Note, utc_now
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.text.redaction import Redactor
from pytest_agentbench.text.signatures import signature
from pytest_agentbench.text.truncation import truncate

AGENT_NAME = "subagents"


class SubagentsAgent:
    """Made per attempt by `agents.variants.agent_builder` with the resolved model config; the
    variant's own params (budget shares, prompts) are read from `ctx.params`."""

    name = AGENT_NAME
    uses_llm_config = True

    def __init__(self, config: LLMAgentConfig, *, redactor: Redactor | None = None,
                 transport: Any = None) -> None:
        self.config, self.redactor, self.transport = config, redactor, transport

    @staticmethod
    def check_params(params: Mapping[str, Any]) -> None:
        """Before the run starts (agents.variants.agent_builder): ModelConfigError naming the
        bad param, or a prompt file that does not exist."""
        parsed = SubagentParams.parse(params)
        for role in ROLES:
            load_prompt(parsed.prompt_name(role))

    def run(self, ctx: AgentContext) -> AgentOutcome:
        try:
            params = SubagentParams.parse(ctx.params)
            prompts = {role: load_prompt(params.prompt_name(role)) for role in ROLES}
        except ModelConfigError as exc:
            raise AgentError(Reason.LLM_ERROR, f"variant params: {exc}", "MODEL_CONFIG") from None
        return _Run(ctx, self.config, params, prompts, self.redactor, self.transport).loop()


def prompt_set_version(prompts: dict[str, tuple[str, str]]) -> str:
    """One version for the four role prompts: `subagents@sha256:<hash of their versions>`."""
    joined = "\n".join(f"{role}={prompts[role][1]}" for role in ROLES)
    return f"subagents@sha256:{hashlib.sha256(joined.encode()).hexdigest()}"


class _Run:
    def __init__(self, ctx: AgentContext, config: LLMAgentConfig, params: SubagentParams,
                 prompts: dict[str, tuple[str, str]], redactor: Redactor | None,
                 transport: Any) -> None:
        self.ctx, self.cfg, self.params = ctx, config.params, params
        self.prompts = {role: text for role, (text, _) in prompts.items()}
        self.caller = ModelCaller(ctx, config, params.shares(), prompt_set_version(prompts),
                                  redactor, transport, AGENT_NAME)
        self.graph = DelegationGraph(ctx.events, ctx.artifacts_dir, AGENT_NAME,
                                     self.caller.redact)
        task = ctx.task
        editable = ""
        if task.agent.editable_globs is not None:
            editable = "You may edit only: " + ", ".join(task.agent.editable_globs)
        self.state = State(task.description or task.id, ctx.failing_command,
                           ctx.failing_output, editable)
        self.specialist = Specialist(
            self.caller, self.graph, ctx.toolbox, self.state, SpecialistLimits(
            params.max_calls_per_delegation, self.cfg.observation_chars, params.state_chars,
            params.max_candidates, params.snippet_chars, self.cfg.max_repeated_errors))
        self.round = 0
        self.noop = self.rejections = self.unchanged = self.verify_failures = 0
        self.last_sig: list[str] | None = signature(1, ctx.failing_output, "")

    def loop(self) -> AgentOutcome:
        try:
            self.caller.write({"meta": {"agent": AGENT_NAME,
                                        "model": self.caller.model_info.model_dump(),
                                        "roles": list(ROLES),
                                        "budget_shares": self.params.shares()}})
            while True:
                self._round()
        except Stop as stopped:
            return self._finish(stopped.outcome)
        except AgentError:
            self._close_open_nodes("error")
            raise
        except Exception as exc:  # a tool call's sandbox went away, ...: the record keeps the cost
            self._close_open_nodes("error")
            attach_spend(exc, self.caller.usage, self.caller.model_info)
            raise
        finally:
            self.caller.close()

    def _round(self) -> None:
        self.round += 1
        try:
            decision, node = decide(self.caller, self.graph, self.state, self.round,
                                    self.prompts[ROUTER], self.params.state_chars)
        except RoleBudgetExhausted as exc:  # without the router nothing can go on
            self._close_open_nodes("budget")
            budget_stop("TOKENS", str(exc))
        if decision is None:
            self.graph.end(node, "invalid", "no usable decision")
            self.state.history.append(f"round {self.round}: the router's answer was unusable")
            self._noop()
            return
        self.graph.end(node, "ok", f"{_verb(decision)}: {decision.brief}")
        if decision.next == "give_up":
            stop("give_up", Reason.AGENT_GAVE_UP, "ROUTER_GAVE_UP",
                 decision.brief or "the router gave up")
        if decision.next == "finish":
            self._verify_and_finish(decision.brief or "finished", "the router's finish", node)
            return
        done = self.specialist.delegate(decision.next, decision.brief, node, self.round,
                                        self.prompts[decision.next])
        self.state.history.append(f"round {self.round}: {done.role} → {done.status}: "
                                  f"{done.summary[:200]}")
        self._after(done, node)

    def _after(self, done: Delegation, node: Node) -> None:
        if done.role == PATCHER:
            self.rejections = 0 if done.changed_files else self.rejections + done.patch_rejections
            if self.rejections >= self.cfg.max_patch_rejections:
                stop("patch_rejected", Reason.TOOL_ERROR, "PATCH_REJECTED",
                     f"{self.rejections} patches rejected in a row")
        for code, output in done.tests:
            self._track_signature(code, output)
        progress = done.status == "ok" and (done.role != PATCHER or bool(done.changed_files))
        answer = done.answer or {}
        if (done.role == TESTER and done.status == "ok"
                and str(answer.get("recommendation", "")).lower() == "done"):
            reason = str(answer.get("reason") or "the tester says done")
            self._verify_and_finish(reason, "the tester's done", node)
        if progress:
            self.noop = 0
        else:
            self._noop()

    def _noop(self) -> None:
        self.noop += 1
        if self.noop >= self.cfg.max_noop:
            stop("no_progress", Reason.AGENT_NO_PROGRESS, None,
                 f"{self.noop} rounds in a row changed nothing")

    def _verify_and_finish(self, summary: str, claim: str, parent: Node) -> None:
        """Run the failing command; finish when it passes, else refuse (bounded)."""
        command = self.ctx.failing_command
        timeout = max(1.0, self.ctx.remaining() - 1.0)  # never past the task's deadline
        result = self.ctx.toolbox.call("run", {"command": command, "timeout_sec": timeout})
        output = truncate(result.to_observation(), head_lines=40, tail_lines=120,
                          max_bytes=self.params.state_chars).text
        passed = result.exit_code == 0 and result.error_type is None  # as llm_v0's check
        self.ctx.events.emit(Note(kind="finish_check", message=(
            f"{claim}: the failing command {'passes' if passed else 'still fails'}"),
            data={"exit_code": result.exit_code, "span": parent.id}), actor="agent")
        self.caller.write({"step": self.caller.step, "ts": utc_now(), "role": "harness",
                           "span": parent.id, "check": {"command": command,
                                                        "exit_code": result.exit_code,
                                                        "claim": claim}})
        if passed:
            finish = self.ctx.toolbox.call("finish", {"summary": summary[:2000]})
            if finish.ok:
                raise Stop(AgentOutcome("finish", summary=self.caller.redact(summary)[:2000]))
        self.state.last_test = f"$ {command}\n{output}"
        if result.exit_code is not None:
            self._track_signature(result.exit_code, result.stdout + result.stderr)
        self.verify_failures += 1
        self.state.notes.append(f"{claim} was refused: the failing command still fails "
                                f"(exit code {result.exit_code}); see the last test run.")
        if self.verify_failures >= self.params.max_verify_failures:
            stop("unverified_finish", Reason.AGENT_GAVE_UP, "UNVERIFIED_FINISH",
                 f"{claim} refused {self.verify_failures} times: the failing command still "
                 f"fails (exit code {result.exit_code})")

    def _track_signature(self, code: int, output: str) -> None:
        sig = signature(code, output, "")
        self.unchanged = self.unchanged + 1 if sig == self.last_sig and code != 0 else 0
        self.last_sig = sig
        if self.unchanged >= self.cfg.stuck_after:
            stop("stuck", Reason.AGENT_STUCK, None, f"test output unchanged for "
                 f"{self.unchanged} runs in a row: {', '.join((sig or [])[:3])}")

    def _close_open_nodes(self, status: str) -> None:
        for node in self.graph.nodes:
            if node.status == "running":
                self.graph.end(node, status, "the run stopped here")

    def _finish(self, outcome: AgentOutcome) -> AgentOutcome:
        self._close_open_nodes("stopped")
        self.graph.write()
        caller = self.caller
        outcome.model, outcome.usage, outcome.steps = caller.model_info, caller.usage, caller.step
        self.ctx.events.emit(Note(
            kind="agent_stop", message=f"{outcome.finished_by}: {outcome.summary}"[:500],
            data={"reason": outcome.reason, "sub_reason": outcome.sub_reason,
                  "steps": caller.step, "rounds": self.round,
                  "usage": caller.usage.model_dump()}), actor="agent")
        caller.write({"step": caller.step, "ts": utc_now(), "stop": {
            "finished_by": outcome.finished_by, "reason": outcome.reason,
            "sub_reason": outcome.sub_reason, "summary": outcome.summary}})
        return outcome


def _verb(decision: RouterDecision) -> str:
    return {SEARCHER: "delegate to searcher", PATCHER: "delegate to patcher",
            TESTER: "delegate to tester"}.get(decision.next, decision.next)
