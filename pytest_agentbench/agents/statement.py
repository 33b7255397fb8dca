"""What an agent is told first: the task's description, its edit policy, the failing command
and its output (llm_v0's first message; a command agent's AGENTBENCH_TASK)."""

from __future__ import annotations

from pytest_agentbench.agents.port import AgentContext
from pytest_agentbench.text.truncation import truncate


def task_statement(ctx: AgentContext, failing_output_chars: int, closing: str) -> str:
    task = ctx.task
    output = truncate(ctx.failing_output, head_lines=80, tail_lines=150,
                      max_bytes=failing_output_chars).text
    parts = [f"Task: {task.description or task.id}"]
    if task.agent.editable_globs is not None:
        parts.append("You may edit only: " + ", ".join(task.agent.editable_globs))
    if task.agent.readonly_globs:
        parts.append("Read-only: " + ", ".join(task.agent.readonly_globs))
    parts.append(f"This command fails:\n    {ctx.failing_command}\n"
                 f"Its output:\n```\n{output.rstrip()}\n```")
    parts.append(closing)
    return "\n\n".join(parts)
