"""Reference agents: oracle (the task's own fix), nop (does nothing), scripted (replays calls)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from pytest_agentbench.core.agent_api import AgentContext, AgentOutcome
from pytest_agentbench.spec.taxonomy import Reason


class NopAgent:
    """Changes nothing. Every valid task must fail under it: a task that passes is broken."""

    name = "nop"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        return AgentOutcome("done", summary="nop agent made no changes")


class OracleAgent:
    """Applies the task's reference solution (`oracle.patch` beside task.yaml) through the tools,
    so the oracle is held to the same edit policy as any agent."""

    name = "oracle"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        patch_path = ctx.task_dir / ctx.task.oracle.patch
        if not patch_path.is_file():
            return AgentOutcome(
                "error",
                Reason.AGENT_GAVE_UP,
                "NO_ORACLE_PATCH",
                f"no reference solution at {patch_path.name}",
            )
        result = ctx.toolbox.call("apply_patch", {"unified_diff": patch_path.read_text("utf-8")})
        if not result.ok:
            return AgentOutcome(
                "patch_rejected",
                Reason.TOOL_ERROR,
                "PATCH_REJECTED",
                f"oracle patch rejected: {result.error_message}",
                steps=1,
            )
        return AgentOutcome("done", summary=f"applied {patch_path.name}", steps=1)


def load_script(path: Path) -> list[dict[str, Any]]:
    """A list of {tool, arguments}: YAML/JSON list, or a recorded `tool_calls.jsonl`."""
    text = path.read_text("utf-8")
    if path.suffix == ".jsonl":
        calls = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        calls = yaml.safe_load(text) or []
    if not isinstance(calls, list):
        raise ValueError(f"{path}: expected a list of tool calls")
    steps = []
    for i, call in enumerate(calls):
        if not isinstance(call, dict) or "tool" not in call:
            raise ValueError(f"{path}: call {i + 1}: expected a mapping with 'tool'")
        steps.append({"tool": call["tool"], "arguments": call.get("arguments") or {}})
    return steps


class ScriptedAgent:
    """Replays tool calls from a file: params `script` (may contain `{task_id}`), default
    `scripted.yaml` beside task.yaml."""

    name = "scripted"

    def __init__(self, script: str | None = None) -> None:
        self.script = script

    def run(self, ctx: AgentContext) -> AgentOutcome:
        template = ctx.params.get("script") or self.script or "scripted.yaml"
        path = Path(str(template).format(task_id=ctx.task.id))
        if not path.is_absolute():
            path = ctx.task_dir / path
        if not path.is_file():
            return AgentOutcome("error", Reason.AGENT_GAVE_UP, "NO_SCRIPT", f"no script {path}")
        steps = load_script(path)
        for n, step in enumerate(steps, 1):
            if step["tool"] == "finish":
                return AgentOutcome("finish", steps=n, summary=str(step["arguments"])[:200])
            if n > ctx.max_steps:
                return AgentOutcome("max_steps", Reason.AGENT_GAVE_UP, steps=n - 1)
            ctx.toolbox.call(step["tool"], step["arguments"])
        return AgentOutcome("done", steps=len(steps), summary=f"replayed {len(steps)} calls")


BUILTIN_AGENTS: dict[str, Any] = {"nop": NopAgent, "oracle": OracleAgent, "scripted": ScriptedAgent}
