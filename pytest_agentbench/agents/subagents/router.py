"""The router: one fresh model call per round, from the run's state, answering
{"next": "searcher" | "patcher" | "tester" | "finish" | "give_up", "brief": "..."}.
A reply without a usable answer gets one reminder (a second call in the same span)."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_agentbench.agents.subagents.calls import ModelCaller, Thread
from pytest_agentbench.agents.subagents.graph import DelegationGraph, Node
from pytest_agentbench.agents.subagents.roles import ROUTER, ROUTER_CHOICES, SPECS
from pytest_agentbench.agents.subagents.state import State
from pytest_agentbench.agents.subagents.structured import answer_from

ROUTER_CALLS = 2  # a first answer and, when it is unusable, one reminder
_SYNONYMS = {"search": "searcher", "patch": "patcher", "test": "tester", "done": "finish",
             "stop": "give_up", "giveup": "give_up", "fix": "patcher", "verify": "tester"}


@dataclass
class RouterDecision:
    next: str
    brief: str


def normalize_choice(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    choice = value.strip().lower().replace("-", "_").replace(" ", "_")
    choice = _SYNONYMS.get(choice, choice)
    return choice if choice in ROUTER_CHOICES else None


def router_brief(state: State, chars: int) -> str:
    parts = state.sections(chars, snippets=False)
    if state.history:
        parts.append("Rounds so far:\n" + "\n".join(f"- {h}" for h in state.history[-12:]))
    for note in state.notes[-3:]:
        parts.append(f"Note: {note}")
    offered = [r for r in ROUTER_CHOICES if r not in state.exhausted]
    if state.exhausted:
        parts.append("Out of budget (do not choose): " + ", ".join(sorted(state.exhausted)))
    parts.append("Choose the next action, one of: " + ", ".join(offered) + ". Answer with one "
                 'JSON object: {"next": "...", "brief": "what the specialist should do"}.')
    return "\n\n".join(parts)


def decide(caller: ModelCaller, graph: DelegationGraph, state: State, round_no: int,
           prompt: str, chars: int) -> tuple[RouterDecision | None, Node]:
    """The router's decision (None: no usable answer) and its span, still open."""
    spec = SPECS[ROUTER]
    node = graph.start(ROUTER, None, round_no, f"round {round_no}")
    thread = Thread(ROUTER, node)
    caller.append(thread, {"role": "system", "content": prompt})
    caller.append(thread, {"role": "user", "content": router_brief(state, chars)})
    for _ in range(ROUTER_CALLS):
        result = caller.call(thread, [spec.answer])
        answer = answer_from(result, spec.answer_name, spec.required)
        choice = normalize_choice(answer.get("next") if answer else None)
        if answer is not None and choice is not None and choice not in state.exhausted:
            return RouterDecision(choice, str(answer.get("brief") or "")[:4000]), node
        offered = [r for r in ROUTER_CHOICES if r not in state.exhausted]
        problem = ("is out of budget" if choice in state.exhausted
                   else "was not understood")
        reminder = (f"Your answer {problem}. Reply with exactly one JSON object "
                    f'{{"next": one of {offered}, "brief": "..."}} and nothing else.')
        if result.tool_calls_source == "native" and result.tool_calls:
            for call in result.tool_calls:
                caller.append(thread, {"role": "tool", "tool_call_id": call.id,
                                       "content": reminder})
        else:
            caller.append(thread, {"role": "user", "content": reminder})
    return None, node
