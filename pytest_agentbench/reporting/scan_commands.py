"""The shell commands of one attempt that the scanners' command rules read, each with where it
was seen, because the sources differ in what an agent could forge:

- `tool call`: a `run` call of the harness's own tools (`agent/tool_calls.jsonl`, Python agents
  such as llm_v0). The harness ran it and wrote the line: the agent cannot leave one out.
- `model reply`: a command the model told a command agent (agents/command.py: a program in the
  sandbox, mini-swe-agent, claude-code, ...) to run, read from the model's replies the gateway
  recorded on the host (`agent/model_calls.jsonl`): a tool call's `command`/`cmd` argument
  (mini-swe-agent's `bash`, claude-code's `Bash`, codex's `shell`, opencode's `bash`) or a
  fenced `bash`/`sh`/`shell`/`console` block of the reply's text (mini-swe-agent's text mode,
  the stdlib test program). The file is written outside the sandbox, so the program cannot
  edit it; what it shows is what the model asked for, not proof the program ran it.
- `trajectory`: a command in the trajectory file the program wrote itself (the variant's
  `trajectory`, collected into `agent/trajectory.*`): `command`/`cmd` values, and fenced shell
  blocks of the assistant's turns (a JSON object whose role or type is `assistant`; all of a
  text trajectory such as aider's chat history). A message whose role or type is user, tool
  or system, a tool's result or output, and the agent's configuration (`config`, `*_template`:
  mini-swe-agent keeps its prompt templates, with example commands, in its trajectory) are
  skipped: they hold output and examples, not commands. The program wrote that file,
  so it can leave a command out or put one in: it is reported under its own source, and only
  for commands no model reply shows already.

A command the program runs of its own accord, that no model asked for and its trajectory does
not show, is seen by none of these (see docs/trust.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

TOOL_CALLS = "tool call"
MODEL_REPLY = "model reply"
TRAJECTORY = "trajectory"
FENCE = re.compile(r"```(?:bash|sh|shell|console|zsh)[ \t]*\n(.*?)```", re.S)
COMMAND_KEYS = ("command", "cmd")
SKIPPED_ROLES = frozenset({"user", "tool", "system", "tool_result", "function_call_output"})
SKIPPED_KEYS = frozenset({"output", "result", "aggregated_output", "stdout", "stderr", "config"})
MAX_DEPTH = 40


@dataclass(frozen=True)
class Command:
    source: str  # TOOL_CALLS | MODEL_REPLY | TRAJECTORY
    step: int
    text: str

    def evidence(self) -> str:
        where = "run" if self.source == TOOL_CALLS else self.source
        return f"step {self.step} {where}: {self.text}"


def tool_call_commands(tool_calls: list[dict[str, Any]]) -> Iterator[Command]:
    """Each `run` call of the harness's tools."""
    for call in tool_calls:
        command = (call.get("arguments") or {}).get("command")
        if call.get("tool") == "run" and isinstance(command, str):
            yield Command(TOOL_CALLS, _int(call.get("step")), command)


def model_reply_commands(model_calls: list[dict[str, Any]]) -> Iterator[Command]:
    """Each command of each reply in the gateway's `model_calls.jsonl`."""
    for n, line in enumerate(model_calls, 1):
        reply = line.get("reply")
        if not isinstance(reply, dict):
            continue
        step = _int(line.get("step")) or n
        for call in reply.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            args = function.get("arguments") if isinstance(function, dict) else None
            for text in _arg_commands(args):
                yield Command(MODEL_REPLY, step, text)
        content = reply.get("content")
        if isinstance(content, str):
            for text in fenced(content):
                yield Command(MODEL_REPLY, step, text)


def trajectory_commands(text: str, suffix: str) -> Iterator[Command]:
    """The commands of an agent-written trajectory: JSON, JSON lines, or text (markdown)."""
    items: list[Any] = []
    if suffix in (".json", ".jsonl"):
        for chunk in ([text] if suffix == ".json" else text.splitlines()):
            try:
                items.append(json.loads(chunk))
            except ValueError:
                continue
    else:
        items = [text]
    found: list[str] = []
    for item in items:  # a text trajectory (aider's chat history) is the assistant's text
        _walk(item, found.append, 0, assistant=isinstance(item, str))
    for n, command in enumerate(found, 1):
        yield Command(TRAJECTORY, n, command)


def merged(*sources: Iterator[Command]) -> list[Command]:
    """The commands of every source in order; a trajectory's command that a tool call or model
    reply already shows is dropped (the stronger source names it)."""
    out: list[Command] = []
    seen: set[str] = set()
    for source in sources:
        for command in source:
            key = " ".join(command.text.split())
            if command.source == TRAJECTORY and key in seen:
                continue
            seen.add(key)
            out.append(command)
    return out


def fenced(text: str) -> list[str]:
    return [block.strip() for block in FENCE.findall(text) if block.strip()]


def _arg_commands(args: Any) -> list[str]:
    """`command`/`cmd` of a tool call's arguments (a JSON string or an object): a string, or an
    argv list (codex's `["bash", "-lc", "..."]`) joined by spaces."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return []
    if not isinstance(args, dict):
        return []
    out = []
    for key in COMMAND_KEYS:
        text = _as_command(args.get(key))
        if text:
            out.append(text)
    return out


def _as_command(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return " ".join(value)
    return None


def _walk(item: Any, emit: Callable[[str], None], depth: int, assistant: bool) -> None:
    """`command`/`cmd` values anywhere but in skipped turns and configuration; fenced shell
    blocks only in the text of an assistant's turn (`assistant`)."""
    if depth > MAX_DEPTH:
        return
    if isinstance(item, str):
        for block in fenced(item) if assistant else ():
            emit(block)
        return
    if isinstance(item, list):
        for value in item:
            _walk(value, emit, depth + 1, assistant)
        return
    if not isinstance(item, dict):
        return
    role, kind = str(item.get("role", "")), str(item.get("type", ""))
    if role in SKIPPED_ROLES or kind in SKIPPED_ROLES:
        return
    assistant = assistant or "assistant" in (role, kind)
    for key, value in item.items():
        if key in COMMAND_KEYS and (text := _as_command(value)):
            emit(text)
        elif key == "arguments" and isinstance(value, str):
            for text in _arg_commands(value):
                emit(text)
        elif key in SKIPPED_KEYS or key.endswith("_template"):
            continue  # what a command printed, or the agent's configuration: not a command
        else:
            _walk(value, emit, depth + 1, assistant)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
