"""The specialists. Each delegation is its own span and conversation: a role prompt, a brief
written from the run's state, then model calls (at most `max_calls_per_delegation`) in which
the specialist may use its read-only or run tools through the toolbox, until it gives its
structured answer:

    searcher  {"candidates": [{"path", "start_line", "end_line", "snippet", "why"}], "summary"}
    patcher   {"unified_diff": "...", "summary": "..."}   applied here with apply_patch; a
              rejected diff goes back to the patcher with the error while calls remain
    tester    {"recommendation": "done" | "retry", "reason": "..."}

An unusable answer gets one line saying what is expected, in the same conversation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_agentbench.agents.port import Tools
from pytest_agentbench.agents.repeats import (
    DEFAULT_MAX_REPEATED_ERRORS,
    REPEATED_TOOL_ERROR,
    RepeatedFailures,
)
from pytest_agentbench.agents.subagents.calls import (
    ModelCaller,
    RoleBudgetExhausted,
    Thread,
    stop,
)
from pytest_agentbench.agents.subagents.graph import DelegationGraph, Node
from pytest_agentbench.agents.subagents.roles import PATCHER, SEARCHER, SPECS, TESTER, RoleSpec
from pytest_agentbench.agents.subagents.state import State
from pytest_agentbench.agents.subagents.structured import answer_from
from pytest_agentbench.llm import ChatResult, ToolCall
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.text.truncation import truncate

_ASK = {
    SEARCHER: ("Find the code responsible for the failure. Answer with one JSON object "
               '{"candidates": [{"path": "...", "start_line": 1, "end_line": 20, '
               '"snippet": "...", "why": "..."}], "summary": "..."}.'),
    PATCHER: ("Write the smallest fix as one unified diff (paths relative to the workspace, "
              "correct @@ line counts, context lines exactly as in the file). Answer with one "
              'JSON object {"unified_diff": "...", "summary": "..."}.'),
    TESTER: ("Run the failing command (and anything else useful), then answer with one JSON "
             'object {"recommendation": "done" or "retry", "reason": "..."}.'),
}


@dataclass
class SpecialistLimits:
    max_calls: int
    observation_chars: int
    state_chars: int
    max_candidates: int
    snippet_chars: int
    max_repeated_errors: int = DEFAULT_MAX_REPEATED_ERRORS


@dataclass
class Delegation:
    role: str
    status: str  # ok | incomplete | invalid | rejected | budget
    summary: str
    answer: dict[str, Any] | None = None
    changed_files: list[str] = field(default_factory=list)
    patch_rejections: int = 0  # rejected apply_patch calls in this delegation
    tests: list[tuple[int, str]] = field(default_factory=list)  # (exit code, output) of runs


class Specialist:
    def __init__(self, caller: ModelCaller, graph: DelegationGraph, toolbox: Tools,
                 state: State, limits: SpecialistLimits) -> None:
        self.caller, self.graph, self.toolbox = caller, graph, toolbox
        self.state, self.limits = state, limits
        self.repeats = RepeatedFailures()  # across delegations: the run stops on a rut

    def delegate(self, role: str, brief: str, parent: Node, round_no: int,
                 prompt: str) -> Delegation:
        spec = SPECS[role]
        node = self.graph.start(role, parent, round_no, brief)
        thread = Thread(role, node)
        self.caller.append(thread, {"role": "system", "content": prompt})
        self.caller.append(thread, {"role": "user", "content": self._brief(role, brief)})
        done = Delegation(role, "incomplete", f"no answer in {self.limits.max_calls} calls")
        # A Stop or AgentError leaves the span open: the run closes it as stopped / error.
        for _ in range(self.limits.max_calls):
            try:
                result = self.caller.call(thread, spec.tools())
            except RoleBudgetExhausted as exc:
                self.state.exhausted.add(role)
                done.status, done.summary = "budget", str(exc)
                break
            if self._answered(spec, result, thread, done):
                break
        self.graph.end(node, done.status, done.summary)
        return done

    # -- one reply --------------------------------------------------------------------------
    def _answered(self, spec: RoleSpec, result: ChatResult, thread: Thread,
                  done: Delegation) -> bool:
        """Handle one reply: True when the delegation is over (answered or failed for good)."""
        answer = answer_from(result, spec.answer_name, spec.required)
        work = [c for c in result.tool_calls if c.name != spec.answer_name]
        if answer is not None:
            feedback = self._accept(spec.name, answer, done)
            if feedback is None:
                return True
            self._reply(thread, result, feedback)
            return False
        if work:
            self._reply(thread, result, None, [self._work(spec, c, done) for c in work])
            return False
        self._reply(thread, result, "Your reply had no usable answer. " + _ASK[spec.name])
        done.status, done.summary = "invalid", "no usable answer"
        return False

    def _reply(self, thread: Thread, result: ChatResult, text: str | None,
               observations: list[str] | None = None) -> None:
        """Answer the model's last reply: tool results for native calls, else a user message."""
        calls, native = result.tool_calls, result.tool_calls_source == "native"
        observations = observations or []
        if native and calls:
            for i, call in enumerate(calls):
                content = observations[i] if i < len(observations) else (text or "ok")
                self.caller.append(thread, {"role": "tool", "tool_call_id": call.id,
                                            "content": content})
            if observations and text:
                self.caller.append(thread, {"role": "user", "content": text})
            return
        parts = [f"[{c.name}] result:\n{o}" for c, o in zip(calls, observations, strict=False)]
        if text:
            parts.append(text)
        self.caller.append(thread, {"role": "user", "content": "\n\n".join(parts) or "ok"})

    def _work(self, spec: RoleSpec, call: ToolCall, done: Delegation) -> str:
        """One work call's observation; the same call failing the same way
        `max_repeated_errors` times in a row stops the run (agents/repeats.py)."""
        text, error = self._work_call(spec, call, done)
        arguments = call.raw_arguments if call.arguments_error else call.arguments
        if self.repeats.see(call.name, arguments, error) >= self.limits.max_repeated_errors:
            stop("repeated_error", Reason.AGENT_NO_PROGRESS, REPEATED_TOOL_ERROR,
                 f"{spec.name}: {self.repeats.summary()}")
        return text

    def _work_call(self, spec: RoleSpec, call: ToolCall, done: Delegation
                   ) -> tuple[str, str | None]:
        if call.arguments_error:
            return (f"ERROR INVALID_ARGUMENTS: {call.name}: {call.arguments_error}\n"
                    "Send the arguments as one JSON object that matches the tool's schema.",
                    "INVALID_ARGUMENTS")
        if call.name not in spec.work_tools:
            allowed = ", ".join([*spec.work_tools, spec.answer_name])
            return f"ERROR UNKNOWN_TOOL: the {spec.name} may use only: {allowed}", "UNKNOWN_TOOL"
        result = self.toolbox.call(call.name, call.arguments)
        text = truncate(result.to_observation(), head_lines=300, tail_lines=200,
                        max_bytes=self.limits.observation_chars).text
        if call.name == "run" and result.exit_code is not None:
            done.tests.append((result.exit_code, text))
            self.state.last_test = f"$ {call.arguments.get('command', '')}\n{text}"
        return text, None if result.ok else result.error_type

    # -- answers ----------------------------------------------------------------------------
    def _accept(self, role: str, answer: dict[str, Any], done: Delegation) -> str | None:
        """None when the answer is taken, else what to tell the specialist."""
        done.answer = answer
        if role == SEARCHER:
            added = self.state.add_candidates(answer.get("candidates"),
                                              self.limits.max_candidates,
                                              self.limits.snippet_chars)
            if not self.state.candidates:
                done.status, done.summary = "invalid", "no candidate files"
                return "No candidate with a file path. " + _ASK[SEARCHER]
            paths = ", ".join(c.path for c in self.state.candidates[:4])
            done.status = "ok"
            done.summary = f"{added} new candidate(s): {paths}. {answer.get('summary') or ''}"
            return None
        if role == PATCHER:
            return self._apply(answer, done)
        recommendation = str(answer.get("recommendation", "")).strip().lower()
        if recommendation not in ("done", "retry"):
            done.status, done.summary = "invalid", f"recommendation {recommendation!r}"
            return 'The recommendation must be "done" or "retry". ' + _ASK[TESTER]
        done.status = "ok"
        done.summary = f"{recommendation}: {answer.get('reason') or ''}"
        return None

    def _apply(self, answer: dict[str, Any], done: Delegation) -> str | None:
        diff = str(answer.get("unified_diff") or "")
        if not diff.endswith("\n"):
            diff += "\n"
        result = self.toolbox.call("apply_patch", {"unified_diff": diff})
        summary = str(answer.get("summary") or "")[:300]
        if result.ok and result.changed_files:
            done.changed_files = list(result.changed_files)
            done.status = "ok"
            done.summary = f"applied to {', '.join(result.changed_files)}: {summary}"
            self.state.last_patch = done.summary
            return None
        observation = truncate(result.to_observation(), head_lines=80, tail_lines=80,
                               max_bytes=self.limits.observation_chars).text
        if result.ok:
            done.status, done.summary = "rejected", "the patch changed nothing"
            self.state.last_patch = "a patch that changed nothing"
            return "The patch applied but changed nothing. " + _ASK[PATCHER]
        if result.error_type == "PATCH_REJECTED":
            done.patch_rejections += 1
        done.status = "rejected"
        done.summary = f"patch rejected: {observation[:200]}"
        self.state.last_patch = f"rejected: {observation[:1500]}"
        return f"The patch was not applied:\n{observation}\nRead the file again and resend."

    def _brief(self, role: str, brief: str) -> str:
        parts = self.state.sections(self.limits.state_chars, snippets=role == PATCHER)
        if brief:
            parts.append(f"The router's brief: {brief}")
        parts.append(_ASK[role])
        return "\n\n".join(parts)
