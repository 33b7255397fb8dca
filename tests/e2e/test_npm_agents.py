"""Issue 23 item 4: the agents shipped as native binaries on npm (Claude Code, Codex CLI,
opencode) as bundled command-agent variants. Each is installed by its variant's install commands
(the per-platform npm package fetched from the registry, its sha512 checked, no node), then runs
headless in the Docker sandbox (network none) and solves fix-mean-off-by-one through pytest and
the model gateway in the protocol it speaks (Anthropic Messages, OpenAI Responses, OpenAI chat),
against a real loopback OpenAI-chat server that scripts two calls of the agent's own shell tool
and a final answer. Its calls are events and `usage`; its trajectory is collected; only the fix
is in the diff; the key planted on the host is in no file of the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.shell_agent_script import ShellScript
from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]
TASK = "fix-mean-off-by-one"
PLANTED_KEY = "sk-test-planted-NPMAGENT-0123456789abcdef"
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
    out = tmp_path / "out"
    env = {**os.environ, "AGENTBENCH_API_KEY": PLANTED_KEY}
    script = ShellScript(COMMANDS)
    with FakeOpenAIServer([], default=script) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
             "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
             f"--agentbench-out={out}", "-k", TASK, "--agentbench-variant", variant,
             "--agentbench-base-url", server.base_url, "--agentbench-model", "some/model"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    (run_dir,) = run_dirs(out)
    (line,) = (run_dir / "attempts.jsonl").read_text().splitlines()
    record = json.loads(line)
    task_dir = run_dir / "tasks" / TASK
    logs = "".join(p.read_text("utf-8", "replace")[-3000:]
                   for p in sorted((task_dir / "logs").glob("agent_program_*")))
    assert record["result"]["passed"] is True, (record["result"], logs)
    # the two shell steps and the final answer went through the agent's own tool
    tool_steps = [r for r in requests if r.json.get("tools")]
    assert len(tool_steps) == len(COMMANDS) + 1, (script.seen_tools, logs)
    assert all(shell in names for names in script.seen_tools if names), script.seen_tools
    assert record["usage"]["llm_calls"] == len(requests)
    assert all(r.headers.get("authorization") == f"Bearer {PLANTED_KEY}" for r in requests)
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    mine = [e for e in events if e.get("task_id") == TASK]
    assert sum(e["type"] == "llm_response" for e in mine) == len(requests)
    protocols = {e["data"]["protocol"] for e in mine if e.get("kind") == "gateway_request"}
    assert protocols == {protocol}
    trajectory = (task_dir / "agent" / trajectory_name).read_text()
    assert "minilib/mathx.py" in trajectory and "4 passed" in trajectory
    diff = (task_dir / "diffs" / "final.patch").read_text()
    assert "+    return sum(values) / len(values)" in diff
    changed = [x.split(" b/", 1)[1] for x in diff.splitlines() if x.startswith("diff --git")]
    assert changed == ["minilib/mathx.py"], diff
    leaks = [p for p in run_dir.rglob("*")
             if p.is_file() and PLANTED_KEY in p.read_text("utf-8", "replace")]
    assert leaks == []
