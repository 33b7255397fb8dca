"""Issue 23 item 4: the agents shipped as native binaries on npm (Claude Code, Codex CLI,
opencode) as bundled command-agent variants. Each is installed by its variant's install commands
(the per-platform npm package fetched from the registry, its sha512 checked, no node), then runs
headless in the Docker sandbox (network none) and solves fix-mean-off-by-one through pytest and
the model gateway in the protocol it speaks (Anthropic Messages, OpenAI Responses, OpenAI chat),
against a real loopback OpenAI-chat server that scripts two calls of the agent's own shell tool
and a final answer. Its calls are events and `usage`; its trajectory is collected; only the fix
is in the diff; the key planted on the host is in no file of the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fakes.shell_agent_script import ShellScript
from tests.support.command_agents import PLANTED_KEY, run_variant

COMMANDS = ["sed -i 's|/ (len(values) - 1)|/ len(values)|' minilib/mathx.py",
            "python -m pytest -q -p no:cacheprovider tests/test_mathx.py"]
# variant: (the protocol it speaks to the gateway, its shell tool, its trajectory file)
AGENTS = {
    "claude-code": ("anthropic_messages", "Bash", "trajectory.jsonl"),
    "codex": ("openai_responses", "exec_command", "trajectory.jsonl"),
    "opencode": ("openai_chat", "bash", "trajectory.jsonl"),
}


@pytest.mark.parametrize("variant", sorted(AGENTS))
def test_npm_agent_solves_a_task_in_the_sandbox(variant: str, tmp_path: Path,
                                                docker_client: Any) -> None:
    protocol, shell, trajectory_name = AGENTS[variant]
    script = ShellScript(COMMANDS)
    run = run_variant(variant, tmp_path / "out", script)
    record, requests, logs = run.record, run.requests, run.program_logs()
    assert record["result"]["passed"] is True, (record["result"], logs)
    # the two shell steps and the final answer went through the agent's own tool
    tool_steps = [r for r in requests if r.json.get("tools")]
    assert len(tool_steps) == len(COMMANDS) + 1, (script.seen_tools, logs)
    assert all(shell in names for names in script.seen_tools if names), script.seen_tools
    assert record["usage"]["llm_calls"] == len(requests)
    assert all(r.headers.get("authorization") == f"Bearer {PLANTED_KEY}" for r in requests)
    mine = run.events()
    assert sum(e["type"] == "llm_response" for e in mine) == len(requests)
    protocols = {e["data"]["protocol"] for e in mine if e.get("kind") == "gateway_request"}
    assert protocols == {protocol}
    trajectory = (run.task_dir / "agent" / trajectory_name).read_text()
    assert "minilib/mathx.py" in trajectory and "4 passed" in trajectory
    diff = (run.task_dir / "diffs" / "final.patch").read_text()
    assert "+    return sum(values) / len(values)" in diff
    changed = [x.split(" b/", 1)[1] for x in diff.splitlines() if x.startswith("diff --git")]
    assert changed == ["minilib/mathx.py"], diff
    assert run.leaks() == []
