"""The drill-down timeline as spans: which phase, agent turn, tool call or model request ran
from when to when (milliseconds from the attempt's first event), for the bars the page draws.

Start and finish events are matched by their key (the phase; the tool and step; the step of a
model request); an agent turn lasts until the next turn or the attempt's last event. A finish
without its start is drawn from `finish - duration_ms`; a start without its finish ends at the
last event, marked open.
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


def _label(kind: str, e: dict[str, Any]) -> str:
    if kind == "phase":
        return f"phase {e.get('phase')}"
    if kind == "tool":
        return f"step {e.get('step')}: {e.get('tool')}"
    if kind == "llm":
        return f"step {e.get('step')}: model"
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
                out.append([_label(kind, s), kind, s["_t"], t, ok])
            elif isinstance(e.get("duration_ms"), (int, float)):
                out.append([_label(kind, e), kind, max(t - float(e["duration_ms"]), 0.0), t, ok])
    end = t_end - t0
    if turn is not None:
        out.append([_label("turn", turn), "turn", turn["_t"], end, None])
    for (start_type, *_), waiting in open_.items():
        kind = _PAIRS[start_type][1]
        out += [[_label(kind, s) + " (no finish)", kind, s["_t"], end, None] for s in waiting]
    out.sort(key=lambda s: (s[2], -s[3]))
    return [[label, kind, round(a, 1), round(b, 1), ok]
            for label, kind, a, b, ok in out[:MAX_SPANS]]
