"""Reference agents: oracle (the task's own fix), nop (does nothing), scripted (replays calls)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from pytest_agentbench.agents.command import CommandAgent
from pytest_agentbench.agents.exploit import ExploitAgent
from pytest_agentbench.agents.port import AgentContext, AgentOutcome
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.tasks.bounded_yaml import parse_yaml, yaml_message
from pytest_agentbench.tasks.taskpack_files import (
    MAX_TASK_ASSET_BYTES,
    UnsafeFileError,
    open_task_file,
    read_regular_file,
)


class NopAgent:
    """Changes nothing. Every valid task must fail under it: a task that passes is broken."""

    name = "nop"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        return AgentOutcome("done", summary="nop agent made no changes")


class OracleAgent:
    """Applies the task's reference solution (`oracle.patch` beside task.yaml) through the tools,
    so the oracle is held to the same edit policy as any agent.

    The patch path comes from the task file: it is read only when it is a regular file inside
    the task directory (symlinks resolved), so a task cannot make the harness read host files.
    """

    name = "oracle"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        # A reference solution that is missing, unreadable or does not apply is the task's
        # problem, never an agent's failure: TASK_INVALID, out of the pass rate.
        name = ctx.task.oracle.patch
        try:
            data = open_task_file(ctx.task_dir, name, MAX_TASK_ASSET_BYTES)
            patch = data.decode("utf-8")
        except FileNotFoundError:
            return AgentOutcome(
                "error", Reason.TASK_INVALID, "NO_ORACLE_PATCH", f"no reference solution at {name}"
            )
        except (UnsafeFileError, OSError, UnicodeDecodeError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            return AgentOutcome(
                "error",
                Reason.TASK_INVALID,
                "ORACLE_PATCH_REFUSED",
                f"oracle.patch {name!r} refused: {detail}",
            )
        result = ctx.toolbox.call("apply_patch", {"unified_diff": patch})
        if not result.ok:
            return AgentOutcome(
                "patch_rejected",
                Reason.TASK_INVALID,
                "ORACLE_PATCH_REJECTED",
                f"{name} does not apply at repo.commit: {result.error_message}",
                steps=1,
            )
        return AgentOutcome("done", summary=f"applied {name}", steps=1)


def load_script(path: Path, text: str | None = None) -> list[dict[str, Any]]:
    """A list of {tool, arguments}: YAML/JSON list, or a recorded `tool_calls.jsonl`."""
    if text is None:
        text = read_regular_file(path, MAX_TASK_ASSET_BYTES).decode("utf-8")
    try:
        if path.suffix == ".jsonl":
            calls = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            calls = parse_yaml(text) or []
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: {yaml_message(exc, text)}") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{path}: not valid JSON lines ({type(exc).__name__})") from None
    if not isinstance(calls, list):
        raise ValueError(f"{path}: expected a list of tool calls")
    steps = []
    for i, call in enumerate(calls):
        if not isinstance(call, dict) or "tool" not in call:
            raise ValueError(f"{path}: call {i + 1}: expected a mapping with 'tool'")
        steps.append({"tool": call["tool"], "arguments": call.get("arguments") or {}})
    return steps


class ScriptedAgent:
    """Replays tool calls from a file: `script` (the variant's param; may contain `{task_id}`),
    default `scripted.yaml` beside task.yaml. Made without one, it reads `ctx.params`."""

    name = "scripted"

    def __init__(self, script: str | None = None) -> None:
        self.script = script

    def run(self, ctx: AgentContext) -> AgentOutcome:
        template = self.script or ctx.params.get("script")
        try:
            text, path = self._read(ctx, template)
        except FileNotFoundError as exc:
            return AgentOutcome("error", Reason.AGENT_GAVE_UP, "NO_SCRIPT", f"no script {exc}")
        except (UnsafeFileError, OSError, UnicodeDecodeError, ValueError, LookupError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            message = f"script refused: {detail}"
            return AgentOutcome("error", Reason.AGENT_GAVE_UP, "SCRIPT_REFUSED", message)
        steps = load_script(path, text)
        for n, step in enumerate(steps, 1):
            if step["tool"] == "finish":
                return AgentOutcome("finish", steps=n, summary=str(step["arguments"])[:200])
            if n > ctx.max_steps:
                return AgentOutcome("max_steps", Reason.AGENT_GAVE_UP, steps=n - 1)
            ctx.toolbox.call(step["tool"], step["arguments"])
        return AgentOutcome("done", steps=len(steps), summary=f"replayed {len(steps)} calls")

    @staticmethod
    def _read(ctx: AgentContext, template: object) -> tuple[str, Path]:
        """The task's own `scripted.yaml` is confined to the task directory; a script named by
        the variant (the user's own configuration) may live anywhere."""
        if not template:
            data = open_task_file(ctx.task_dir, "scripted.yaml", MAX_TASK_ASSET_BYTES)
            return data.decode("utf-8"), ctx.task_dir / "scripted.yaml"
        path = Path(str(template).format(task_id=ctx.task.id))
        if not path.is_absolute():
            path = ctx.task_dir / path
        if not path.exists():
            raise FileNotFoundError(path)
        return read_regular_file(path, MAX_TASK_ASSET_BYTES).decode("utf-8"), path


BUILTIN_AGENTS: dict[str, Any] = {"nop": NopAgent, "oracle": OracleAgent, "scripted": ScriptedAgent,
                                  "exploit": ExploitAgent, "command": CommandAgent}
