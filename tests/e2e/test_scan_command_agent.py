"""The scanners see a command agent's commands, end to end: the standard-library agent program
(tests/fixtures/command_agent/agent.py) runs in the Docker sandbox behind the model gateway; the
scripted model tells it to run `git log --all` before the fix; `agentbench report scan` over the
run names that command as a git-history finding on the passing attempt, read from the model's
replies the gateway recorded on the host (the program cannot edit that file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]
TASK = "fix-mean-off-by-one"
FIX = "sed -i 's|/ (len(values) - 1)|/ len(values)|' minilib/mathx.py"


def test_a_command_agents_git_history_command_is_a_finding(tmp_path: Path,
                                                           docker_client: Any) -> None:
    variant = tmp_path / "variant.yaml"
    variant.write_text(json.dumps({
        "name": "stdlib-program", "agent": "command",
        "params": {"command": "python3 $AGENTBENCH_PROGRAM_DIR/agent.py",
                   "program_dir": str(ROOT / "tests" / "fixtures" / "command_agent")}}))
    script = [Reply("History first.\n```bash\ngit log --all --oneline\n```"),
              Reply(f"Fix the divisor.\n```bash\n{FIX}\n```"),
              Reply("Done.")]
    out = tmp_path / "out"
    with FakeOpenAIServer(script) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
             "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
             f"--agentbench-out={out}", "-k", TASK, f"--agentbench-variant={variant}",
             "--agentbench-base-url", server.base_url, "--agentbench-model", "some/model"],
            cwd=ROOT, env={**os.environ, "AGENTBENCH_API_KEY": "sk-test-scan-0123456789"},
            capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    (run_dir,) = run_dirs(out)
    record = json.loads((run_dir / "attempts.jsonl").read_text())
    assert record["result"]["passed"] is True, record["result"]
    logs = "".join(p.read_text() for p in (run_dir / "tasks" / TASK / "logs").glob("agent_pro*"))
    assert "RAN git log --all --oneline -> 0" in logs, logs[-3000:]
    scan = subprocess.run([sys.executable, "-m", "pytest_agentbench.cli.main", "report", "scan",
                           str(run_dir), "--format", "json", "--fail-on-suspicious"],
                          capture_output=True, text=True)
    assert scan.returncode == 1, scan.stdout + scan.stderr  # a high finding on a pass
    findings = json.loads(scan.stdout)["findings"]
    assert [(f["rule"], f["source"], f["passed"], f["evidence"]) for f in findings] == [
        ("git-history", "model reply", True, "step 1 model reply: git log --all --oneline")]


def test_mini_swe_agents_bash_tool_call_is_a_finding_once(tmp_path: Path,
                                                          docker_client: Any) -> None:
    """mini-swe-agent (installed by its bundled variant) told, through its `bash` tool, to run
    `git log --all`: the finding comes from the model's reply; its own trajectory shows the
    same command and adds no second finding."""
    from tests.e2e.test_mini_swe_agent import COMMANDS
    from tests.support.command_agents import run_variant

    commands = ["git log --all --oneline", *COMMANDS]

    def scripted(request: dict[str, Any]) -> Reply:
        step = sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")
        return Reply(f"THOUGHT: step {step}.", tool_calls=[
            {"name": "bash", "arguments": {"command": commands[min(step, len(commands) - 1)]},
             "id": f"call_{step}"}])

    run = run_variant("mini-swe-agent", tmp_path / "out", scripted)
    assert run.record["result"]["passed"] is True, (run.record["result"], run.program_logs())
    trajectory = (run.task_dir / "agent" / "trajectory.json").read_text()
    assert "git log --all --oneline" in trajectory
    scan = subprocess.run([sys.executable, "-m", "pytest_agentbench.cli.main", "report", "scan",
                           str(run.run_dir), "--format", "json"], capture_output=True, text=True)
    findings = json.loads(scan.stdout)["findings"]
    assert [(f["rule"], f["source"], f["evidence"]) for f in findings] == [
        ("git-history", "model reply", "step 1 model reply: git log --all --oneline")]
