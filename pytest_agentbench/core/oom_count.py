"""How often the kernel's OOM killer struck during one attempt, from what the attempt wrote.

Three places say it, and none says it twice:
- a harness command (setup, capture, baseline, scoring, a command agent's program) emits a
  `command_finished` event with `oom_killed` (events.jsonl of the worker, shared by its
  attempts: read backwards from its end to this attempt's `task_started`, so the cost is the
  attempt's own events, not the run's);
- a tool command of a built-in agent is logged in `agent/tool_calls.jsonl` with
  `result.data.oom_killed`;
- a sandbox whose container the OOM killer took down ends the attempt AGENT_KILLED_SANDBOX/OOM
  (the command running then has no result of its own).
The sandbox reports a command as OOM-killed when the cgroup's `oom_kill` counter rose while it
ran, so several kills within one command count once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from pytest_agentbench.schemas.records import Result
from pytest_agentbench.schemas.taxonomy import Reason

_CHUNK = 1 << 16
_MARK = b'"oom_killed": true'
_MARK_COMPACT = b'"oom_killed":true'


def oom_kills(events_path: Path | None, attempt_id: str, tool_calls: Path,
              result: Result) -> int:
    """The attempt's OOM kills (see the module docstring); unreadable files count none."""
    count = _events_oom(events_path, attempt_id) if events_path is not None else 0
    count += _tool_calls_oom(tool_calls)
    if result.failure_reason == Reason.AGENT_KILLED_SANDBOX and result.sub_reason == "OOM":
        count += 1
    return count


def _events_oom(path: Path, attempt_id: str) -> int:
    count = 0
    try:
        for line in _lines_backwards(path):
            if attempt_id.encode() not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict) or event.get("attempt_id") != attempt_id:
                continue
            if event.get("type") == "task_started":
                break
            if event.get("type") == "command_finished" and event.get("oom_killed") is True:
                count += 1
    except OSError:
        return count
    return count


def _tool_calls_oom(path: Path) -> int:
    count = 0
    try:
        with path.open("rb") as fh:
            for line in fh:
                if _MARK not in line and _MARK_COMPACT not in line:
                    continue
                try:
                    data = (json.loads(line).get("result") or {}).get("data") or {}
                except (ValueError, AttributeError):
                    continue
                count += isinstance(data, dict) and data.get("oom_killed") is True
    except OSError:
        return count
    return count


def _lines_backwards(path: Path) -> Iterator[bytes]:
    """The lines of `path`, last first, read in chunks from its end."""
    with path.open("rb") as fh:
        pos = os.fstat(fh.fileno()).st_size
        rest = b""
        while pos > 0:
            step = min(_CHUNK, pos)
            pos -= step
            fh.seek(pos)
            block = fh.read(step) + rest
            lines = block.split(b"\n")
            rest = lines[0]
            for line in reversed(lines[1:]):
                if line.strip():
                    yield line
        if rest.strip():
            yield rest
