"""The delegation graph: one node per router decision and per specialist delegation, as
`DelegationStart`/`DelegationEnd` events (parent/child spans) and as
`<artifacts>/delegation.json` (rewritten whenever a node ends, so a run cut short keeps it):

    {"version": 1, "agent": "subagents", "nodes": [
       {"id": "s1", "parent": null, "role": "router", "step": 1, "calls": 1,
        "prompt_tokens": 900, "completion_tokens": 40, "status": "ok",
        "summary": "delegate to searcher"}, ...]}

`step` is the router round the node belongs to (a specialist shares its router's round).
"""

from __future__ import annotations

import inspect
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_agentbench.agents.port import EventLog
from pytest_agentbench.schemas.events import Actor, DelegationEnd, DelegationStart, Event

GRAPH_VERSION = 1
SUMMARY_CHARS = 300


@dataclass
class Node:
    id: str
    parent: str | None
    role: str
    step: int
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    status: str = "running"
    summary: str = ""


class DelegationGraph:
    def __init__(self, events: EventLog, artifacts_dir: Path | None, agent: str,
                 redact: Any = None) -> None:
        self.events, self.agent = events, agent
        self.path = None if artifacts_dir is None else Path(artifacts_dir) / "delegation.json"
        self.redact = redact or (lambda obj: obj)
        self.nodes: list[Node] = []

    def start(self, role: str, parent: Node | None, step: int, brief: str = "") -> Node:
        node = Node(f"s{len(self.nodes) + 1}", parent.id if parent else None, role, step)
        self.nodes.append(node)
        emit_in_span(self.events, DelegationStart(
            span_id=node.id, parent_span_id=node.parent, role=role, step=step,
            brief=brief[:1000]), node.id)
        return node

    def end(self, node: Node, status: str, summary: str) -> None:
        if node.status != "running":
            return
        node.status, node.summary = status, " ".join(summary.split())[:SUMMARY_CHARS]
        emit_in_span(self.events, DelegationEnd(
            span_id=node.id, role=node.role, status=status, prompt_tokens=node.prompt_tokens,
            completion_tokens=node.completion_tokens, calls=node.calls, summary=node.summary),
            node.id)
        self.write()

    def to_json(self) -> dict[str, Any]:
        return {"version": GRAPH_VERSION, "agent": self.agent,
                "nodes": [asdict(n) for n in self.nodes]}

    def write(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.redact(self.to_json()), indent=1, ensure_ascii=False),
                       encoding="utf-8")
        os.replace(tmp, self.path)


def emit_in_span(events: EventLog, event: Event, span_id: str | None,
                 actor: Actor = "agent") -> str:
    """Emit with the envelope's `span_id` set when the log takes one (core's EventSink does;
    the EventLog port does not promise it)."""
    try:
        takes_span = "span_id" in inspect.signature(events.emit).parameters
    except (TypeError, ValueError):
        takes_span = False
    if takes_span and span_id is not None:
        emit: Any = events.emit
        return str(emit(event, actor=actor, span_id=span_id))
    return events.emit(event, actor=actor)
