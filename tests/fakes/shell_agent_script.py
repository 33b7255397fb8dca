"""A scripted model for command agents that have a shell tool (Claude Code's `Bash`, Codex's
`shell` / `exec_command`, opencode's `bash`), for FakeOpenAIServer's `default`:

    script = ShellScript(["sed -i ... minilib/mathx.py", "python -m pytest -q tests"])
    with FakeOpenAIServer([], default=script) as upstream: ...

The gateway hands the upstream every protocol as OpenAI chat, so one script drives them all. The
next step is chosen by how many tool calls the agent's request already holds (these agents
resend the whole conversation): the i-th command as a call of the request's shell tool, its
arguments shaped by that tool's JSON schema; after the last, a final text answer. A request
without tools (a title, a summary, a quota probe) gets a short text and does not count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.openai_server import Reply

SHELL_TOOLS = ("Bash", "bash", "shell", "exec_command", "shell_command", "container.exec")
USAGE = {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940}


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    return tool.get("function", tool) if isinstance(tool, dict) else {}


def shell_tool(request: dict[str, Any]) -> dict[str, Any] | None:
    """The request's shell tool (its chat `function` object), the first of SHELL_TOOLS found."""
    by_name = {_function(t).get("name"): _function(t) for t in request.get("tools") or []}
    return next((by_name[n] for n in SHELL_TOOLS if n in by_name), None)


def shell_arguments(tool: dict[str, Any], command: str) -> dict[str, Any]:
    """Arguments for `command` as the tool's schema wants them: a string or an argv list under
    `command` or `cmd`, and a filler for any other required string."""
    schema = tool.get("parameters") or {}
    props: dict[str, Any] = schema.get("properties") or {}
    key = "command" if "command" in props or "cmd" not in props else "cmd"
    spec = props.get(key) or {}
    types = spec.get("type") if isinstance(spec.get("type"), list) else [spec.get("type")]
    args: dict[str, Any] = {key: ["bash", "-lc", command] if "array" in types else command}
    for name in schema.get("required") or []:
        if name not in args and (props.get(name) or {}).get("type") == "string":
            args[name] = "scripted step"
    return args


@dataclass
class ShellScript:
    commands: list[str]
    final: str = "The fix is in place and the tests pass."
    seen_tools: list[list[str]] = field(default_factory=list)  # tool names of each request

    def __call__(self, request: dict[str, Any]) -> Reply:
        names = [_function(t).get("name", "?") for t in request.get("tools") or []]
        self.seen_tools.append(names)
        tool = shell_tool(request)
        if tool is None:
            return Reply("OK.", usage=USAGE)
        step = sum(len(m.get("tool_calls") or []) for m in request.get("messages", [])
                   if m.get("role") == "assistant")
        if step >= len(self.commands):
            return Reply(self.final, usage=USAGE)
        arguments = shell_arguments(tool, self.commands[step])
        return Reply(f"Step {step}.", usage=USAGE, tool_calls=[
            {"name": tool["name"], "arguments": json.dumps(arguments), "id": f"call_s{step}"}])
