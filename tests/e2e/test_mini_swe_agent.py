"""mini-swe-agent, installed from PyPI by the bundled variant's install
commands (once per runner image, with the network, before any agent's clock), solves
fix-mean-off-by-one inside the Docker sandbox (network none) through pytest and the model
gateway, against a real loopback HTTP server that speaks OpenAI chat with tool calls and
scripts the fix. Its calls are events and `usage`; its trajectory is collected; the key planted
on the host is in no file of the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import Reply
from tests.support.command_agents import PLANTED_KEY, run_variant

COMMANDS = [
    "cat minilib/mathx.py",
    "sed -i 's|/ (len(values) - 1)|/ len(values)|' minilib/mathx.py",
    "python -m pytest -q -p no:cacheprovider tests/test_mathx.py",
    "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
]


def scripted_bash(request: dict[str, Any]) -> Reply:
    """mini-swe-agent's next step, chosen by how many replies its request already holds (it
    resends the whole conversation), as a call of its `bash` tool."""
    step = sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")
    command = COMMANDS[min(step, len(COMMANDS) - 1)]
    return Reply(f"THOUGHT: step {step}.", tool_calls=[
        {"name": "bash", "arguments": {"command": command}, "id": f"call_{step}"}],
        usage={"prompt_tokens": 700, "completion_tokens": 30, "total_tokens": 730})


def test_mini_swe_agent_solves_a_task_in_the_sandbox(tmp_path: Path, docker_client: Any) -> None:
    run = run_variant("mini-swe-agent", tmp_path / "out", scripted_bash)
    record, requests = run.record, run.requests
    assert record["result"]["passed"] is True, (record["result"], run.program_logs())
    assert record["usage"]["llm_calls"] == len(requests) == len(COMMANDS)
    assert all(r.headers.get("authorization") == f"Bearer {PLANTED_KEY}" for r in requests)
    assert requests[0].json.get("tools"), "mini-swe-agent's bash tool reached the upstream"
    trajectory = json.loads((run.task_dir / "agent" / "trajectory.json").read_text())
    assert trajectory["info"]["exit_status"] == "Submitted", trajectory["info"]
    diff = (run.task_dir / "diffs" / "final.patch").read_text()
    assert "+    return sum(values) / len(values)" in diff
    assert run.leaks() == []
