"""Search across the runs of an output root by task, reason, signature or command.

A query is a case-insensitive substring. Where each field comes from, per attempt:
- task: the task id;
- reason: the failure reason and the record's one-line summary;
- signature: each line of the failure signature;
- command: each harness command (`command_finished` events: setup, baseline, scoring) and each
  `command` argument of the agent's tool calls (`agent/tool_calls.jsonl`).
Commands are read once per run and kept while its files stay the same (Store.memo). Files are
read through reporting.run_files (no link followed, capped); every hit is redacted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from pytest_agentbench.reporting.names import EVENTS_FILE
from pytest_agentbench.reporting.run_files import read_run_file
from pytest_agentbench.viewer import confine
from pytest_agentbench.viewer.data import Store, plain_dict

FIELDS = ("task", "reason", "signature", "command")
MAX_HITS = 200
MAX_EVENTS_BYTES = 64 * 1024 * 1024
MAX_TOOL_CALLS_BYTES = 8 * 1024 * 1024
SNIPPET = 160


def snippet(text: str, at: int, length: int) -> str:
    """The part of `text` around the match at `at` (one line, at most about SNIPPET chars)."""
    start = max(0, at - SNIPPET // 2)
    end = min(len(text), at + length + SNIPPET // 2)
    cut = " ".join(text[start:end].split())
    return ("…" if start else "") + cut + ("…" if end < len(text) else "")


def _jsonl(data: bytes | None) -> Iterator[dict[str, Any]]:
    for line in (data or b"").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def run_commands(run: Path, records: list[dict[str, Any]]) -> dict[str, list[str]]:
    """attempt id -> the commands of that attempt (harness commands, then the agent's)."""
    found: dict[str, list[str]] = {}
    events = read_run_file(run, EVENTS_FILE, MAX_EVENTS_BYTES).data
    for event in _jsonl(events):
        if event.get("type") == "command_finished" and isinstance(event.get("command"), str):
            found.setdefault(str(event.get("attempt_id")), []).append(event["command"])
    for rec in records:
        task_dir = rec.get("task_dir")
        if not task_dir:
            continue
        calls = read_run_file(run, f"{task_dir}/agent/tool_calls.jsonl", MAX_TOOL_CALLS_BYTES)
        for call in _jsonl(calls.data):
            args = call.get("arguments")
            if isinstance(args, dict) and isinstance(args.get("command"), str):
                found.setdefault(str(rec.get("attempt_id")), []).append(args["command"])
    return found


def _texts(rec: dict[str, Any], commands: dict[str, list[str]],
           where: str) -> Iterator[tuple[str, str]]:
    if where in ("all", "task"):
        yield "task", str(rec.get("task_id") or "")
    if where in ("all", "reason"):
        for text in (rec.get("failure_reason"), rec.get("summary")):
            if text:
                yield "reason", str(text)
    if where in ("all", "signature"):
        for line in rec.get("signature") or []:
            yield "signature", str(line)
    if where in ("all", "command"):
        for command in commands.get(str(rec.get("attempt_id")), []):
            yield "command", command


def search(store: Store, query: str, where: str = "all",
           max_hits: int = MAX_HITS) -> dict[str, Any]:
    """Hits (run, task, attempt, field, snippet) of `query` in `where` ('all' or one of
    FIELDS) across every run of the store's root, newest run first."""
    from pytest_agentbench.text.redaction import Redactor

    if where != "all" and where not in FIELDS:
        raise ValueError(f"in={where!r}: expected all or one of {', '.join(FIELDS)}")
    needle = query.strip().lower()
    hits: list[dict[str, Any]] = []
    searched = 0
    more = False
    if needle:
        for name in reversed(confine.run_names(store.root)):  # names start with the start time
            run = store.root / name
            frame = store.frame(run)
            if frame is None:
                continue
            searched += 1
            records = frame.to_dict("records")
            commands: dict[str, list[str]] = {}
            if where in ("all", "command"):
                stamp = (store.stamp(run), _events_stamp(run))
                commands = store.memo(("commands", str(run)), stamp,
                                      partial(run_commands, run, records))
            for rec in records:
                for field, text in _texts(rec, commands, where):
                    at = text.lower().find(needle)
                    if at < 0:
                        continue
                    if len(hits) >= max_hits:
                        more = True
                        break
                    hits.append({"run": name, "variant": rec.get("variant"),
                                 "task_id": rec.get("task_id"),
                                 "attempt_index": rec.get("attempt_index"),
                                 "passed": rec.get("passed"), "reason": rec.get("failure_reason"),
                                 "field": field, "text": snippet(text, at, len(needle))})
    return plain_dict(Redactor().redact_obj({"query": query, "in": where, "runs_searched": searched,
                                        "hits": hits, "more": more}))


def _events_stamp(run: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(run / EVENTS_FILE)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)
