"""The agent's own artifacts in the HTML drill-down: `agent/context_manifest.json` (what the
context packer put in the first message, and what it left out) and `agent/delegation.json` (the
sub-agents' delegation graph).

Both are agent output in a run directory from elsewhere: they are read without following any
link, regular files only, up to MAX_JSON_BYTES (run_files.py), and turned into plain rows of
strings and numbers that the page's script puts in with `textContent`. A file that is not what
it should be becomes one `error` line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agentbench.reporting.run_files import read_run_file

CONTEXT_FILE = "agent/context_manifest.json"
DELEGATION_FILE = "agent/delegation.json"
MAX_JSON_BYTES = 4_000_000
MAX_ROWS = 500  # items per pack, nodes per graph


class _Bad(Exception):
    """The file's content is not the documented shape (one line, the field)."""


def _load(run_dir: Path, art: str | None, rel: str,
          parse: Callable[[Any], dict[str, Any]]) -> dict[str, Any] | None:
    """None when the file is absent; else the parsed rows or {"error": one line}. `art` is the
    attempt's folder relative to `run_dir`."""
    if art is None:
        return None
    found = read_run_file(run_dir, f"{art}/{rel}", MAX_JSON_BYTES)
    if found.missing:
        return None
    if found.data is None:  # a link, a FIFO, ...: never opened
        return {"error": f"{rel}: not shown ({found.where}: {found.why})"}
    if found.cut:
        return {"error": f"{rel}: larger than {MAX_JSON_BYTES} bytes; not shown"}
    try:
        return parse(json.loads(found.data))
    except (ValueError, RecursionError) as exc:
        return {"error": f"{rel}: not readable JSON ({' '.join(str(exc).split())[:200]})"}
    except _Bad as exc:
        return {"error": f"{rel}: {exc}"}


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Bad(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _int(value: Any) -> int | None:
    """A count from agent output: an int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any, limit: int = 300) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def parse_context(data: Any) -> dict[str, Any]:
    """{"agent", "budget", "chars_per_token", "packs": [{"step", "used", "items": [[path,
    lines, "included"|"excluded", reason, tokens]], "more"}]}"""
    top = _obj(data, "top level")
    packs = []
    for n, raw in enumerate(_list(top.get("packs"), "packs")):
        pack = _obj(raw, f"packs[{n}]")
        items = _list(pack.get("items"), f"packs[{n}].items")
        rows = []
        for k, item in enumerate(items[:MAX_ROWS]):
            it = _obj(item, f"packs[{n}].items[{k}]")
            start, end = _int(it.get("start_line")), _int(it.get("end_line"))
            lines = "" if start is None else (f"{start}–{end}" if end is not None else f"{start}–")
            rows.append([_text(it.get("path")), lines,
                         "included" if it.get("included") is True else "excluded",
                         _text(it.get("reason")), _int(it.get("tokens"))])
        packs.append({"step": _int(pack.get("step")), "used": _int(pack.get("used_tokens")),
                      "items": rows, "more": max(0, len(items) - MAX_ROWS)})
    return {"agent": _text(top.get("agent")), "budget": _int(top.get("budget_tokens")),
            "chars_per_token": top.get("chars_per_token")
            if isinstance(top.get("chars_per_token"), int | float)
            and not isinstance(top.get("chars_per_token"), bool) else None,
            "packs": packs}


def parse_delegation(data: Any) -> dict[str, Any]:
    """{"agent", "tree": [[depth, role, calls, tokens, status, summary, id]] in depth-first
    order (parent before children; a node whose parent is unknown, or on a cycle, is a root),
    "roles": [[role, nodes, calls, prompt tokens, completion tokens, tokens]], "more"}"""
    top = _obj(data, "top level")
    raw = _list(top.get("nodes"), "nodes")
    nodes: dict[str, dict[str, Any]] = {}
    for n, item in enumerate(raw[:MAX_ROWS]):
        node = _obj(item, f"nodes[{n}]")
        key = node.get("id")
        if not isinstance(key, str | int) or isinstance(key, bool) or str(key) in nodes:
            raise _Bad(f"nodes[{n}].id: expected a unique string, got {_text(key, 40)!r}")
        nodes[str(key)] = node
    children: dict[str | None, list[str]] = {}
    for key, node in nodes.items():
        parent = node.get("parent")
        parent = str(parent) if parent is not None and str(parent) in nodes else None
        children.setdefault(parent, []).append(key)
    tree: list[list[Any]] = []
    seen: set[str] = set()

    def walk(key: str, depth: int) -> None:
        stack = [(key, depth)]
        while stack:
            k, d = stack.pop()
            if k in seen:
                continue
            seen.add(k)
            tree.append(_node_row(d, k, nodes[k]))
            stack.extend((c, d + 1) for c in reversed(children.get(k, [])))

    for root in children.get(None, []):
        walk(root, 0)
    for key in nodes:  # on a cycle: no root reaches it
        walk(key, 0)
    roles: dict[str, list[Any]] = {}
    for node in nodes.values():
        role = _text(node.get("role"), 60) or "(no role)"
        row = roles.setdefault(role, [role, 0, 0, 0, 0, 0])
        prompt, completion = _int(node.get("prompt_tokens")) or 0, \
            _int(node.get("completion_tokens")) or 0
        row[1] += 1
        row[2] += _int(node.get("calls")) or 0
        row[3] += prompt
        row[4] += completion
        row[5] += prompt + completion
    return {"agent": _text(top.get("agent")), "tree": tree,
            "roles": sorted(roles.values(), key=lambda r: (-r[5], r[0])),
            "more": max(0, len(raw) - MAX_ROWS)}


def _node_row(depth: int, key: str, node: dict[str, Any]) -> list[Any]:
    prompt, completion = _int(node.get("prompt_tokens")), _int(node.get("completion_tokens"))
    tokens = None if prompt is None and completion is None else (prompt or 0) + (completion or 0)
    return [depth, _text(node.get("role"), 60) or "(no role)", _int(node.get("calls")), tokens,
            _text(node.get("status"), 60), _text(node.get("summary")), _text(key, 60)]


def agent_artifacts(run_dir: Path, art: str | None) -> dict[str, Any]:
    """The drill-down's `context` and `delegation` entries of one attempt (None when absent);
    `art` is the attempt's folder relative to `run_dir` (None: it has none)."""
    return {"context": _load(run_dir, art, CONTEXT_FILE, parse_context),
            "delegation": _load(run_dir, art, DELEGATION_FILE, parse_delegation)}
