"""The drill-down timeline as spans: which phase, agent turn, tool call or model request ran
from when to when (milliseconds from the attempt's first event), for the bars the page draws.

Start and finish events are matched by their key (the phase; the tool and step; the step of a
model request); an agent turn lasts until the next turn or the attempt's last event. A finish
without its start is drawn from `finish - duration_ms`; a start without its finish ends at the
last event, marked open.

Model requests and tool calls share one step counter on the page (`step_numbers`): the agents
count model turns and the tools count calls, each from 1, so "step 3: model" and "step 3: run"
were different moments.
"""

from __future__ import annotations

from typing import Any

MAX_SPANS = 300

# start type -> (finish type, kind drawn, the fields that pair them)
_PAIRS = {
    "phase_started": ("phase_finished", "phase", ("phase",)),
    "tool_call_started": ("tool_call_finished", "tool", ("tool", "step")),
    "llm_request": ("llm_response", "llm", ("step",)),
    "delegation_start": ("delegation_end", "delegation", ("node_id", "role")),
}
_FINISH = {finish: (start, kind, keys) for start, (finish, kind, keys) in _PAIRS.items()}


StepNumbers = dict[tuple[str, Any], int]
_STEP_KIND = {"llm_request": "llm", "tool_call_started": "tool", "llm_response": "llm",
              "tool_call_finished": "tool"}


def step_numbers(events: list[dict[str, Any]]) -> StepNumbers:
    """One counter over model requests and tool calls in the order they happened: ("llm",
    model step) and ("tool", tool step) -> 1, 2, 3..."""
    numbers: StepNumbers = {}
    ordered = sorted(events, key=lambda e: (float(e.get("mono_ms") or 0),
                                            e.get("seq") if isinstance(e.get("seq"), int) else 0))
    for e in ordered:
        kind = _STEP_KIND.get(str(e.get("type")))
        if kind is not None and e.get("step") is not None:
            numbers.setdefault((kind, e.get("step")), len(numbers) + 1)
    return numbers


def _label(kind: str, e: dict[str, Any], numbers: StepNumbers | None = None) -> str:
    if kind == "phase":
        return f"phase {e.get('phase')}"
    if kind in ("tool", "llm"):
        step = (numbers or {}).get((kind, e.get("step")), e.get("step"))
        return f"step {step}: " + (str(e.get("tool")) if kind == "tool" else "model")
    if kind == "turn":
        return f"turn {e.get('step')}"
    return f"{e.get('role') or 'delegate'}"


def spans(events: list[dict[str, Any]]) -> list[list[Any]]:
    """[label, kind, start_ms, end_ms, ok] per span, relative to the first event, in start
    order; at most MAX_SPANS (the event table below the bars keeps every event)."""
    timed = [e for e in events if isinstance(e.get("mono_ms"), (int, float))]
    if not timed:
        return []
    t0 = min(float(e["mono_ms"]) for e in timed)
    t_end = max(float(e["mono_ms"]) for e in timed)
    numbers = step_numbers(timed)
    open_: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    out: list[list[Any]] = []
    turn: dict[str, Any] | None = None
    for e in timed:
        t = float(e["mono_ms"]) - t0
        etype = str(e.get("type"))
        if etype == "agent_turn_started":
            if turn is not None:
                out.append([_label("turn", turn), "turn", turn["_t"], t, None])
            turn = {**e, "_t": t}
        elif etype in _PAIRS:
            _, kind, keys = _PAIRS[etype]
            open_.setdefault((etype, *(e.get(k) for k in keys)), []).append({**e, "_t": t})
        elif etype in _FINISH:
            start_type, kind, keys = _FINISH[etype]
            waiting = open_.get((start_type, *(e.get(k) for k in keys)))
            ok = e.get("ok")
            if waiting:
                s = waiting.pop(0)
                out.append([_label(kind, s, numbers), kind, s["_t"], t, ok])
            elif isinstance(e.get("duration_ms"), (int, float)):
                start = max(t - float(e["duration_ms"]), 0.0)
                out.append([_label(kind, e, numbers), kind, start, t, ok])
    end = t_end - t0
    if turn is not None:
        out.append([_label("turn", turn), "turn", turn["_t"], end, None])
    for (start_type, *_), waiting in open_.items():
        kind = _PAIRS[start_type][1]
        out += [[_label(kind, s, numbers) + " (no finish)", kind, s["_t"], end, None]
                for s in waiting]
    out.sort(key=lambda s: (s[2], -s[3]))
    return [[label, kind, round(a, 1), round(b, 1), ok]
            for label, kind, a, b, ok in out[:MAX_SPANS]]
