"""Issue 23 items 1–3: an agent program of its own, run inside the Docker sandbox (network none)
behind the attempt's model gateway, reaching the model through a relay on the sandbox's
loopback and a Unix socket. The program (tests/fixtures/command_agent/agent.py, standard library
only) asks a real loopback HTTP server that speaks OpenAI chat what to run; the server scripts
the fix. Checked: the task passes through pytest and Docker; the model calls are events and
`usage`; the model's key, planted in the host environment, is in no file of the run, in no
environment variable and no process argument inside the sandbox (the program prints all it can
read); a budget of one call refuses the second before it reaches the upstream."""

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
PROGRAM_DIR = ROOT / "tests" / "fixtures" / "command_agent"
PLANTED_KEY = "sk-test-planted-COMMANDAGENT-0123456789abcdef"
USAGE = {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940, "cost": 0.001}
FIX = ("python3 - <<'PY'\nimport pathlib\np = pathlib.Path('minilib/mathx.py')\n"
       "p.write_text(p.read_text().replace('/ (len(values) - 1)', '/ len(values)'))\nPY\n")


def _variant(tmp: Path, budgets: dict[str, Any] | None = None) -> Path:
    path = tmp / "variant.yaml"
    path.write_text(json.dumps({
        "name": "stdlib-program", "agent": "command",
        "params": {"command": "python3 $AGENTBENCH_PROGRAM_DIR/agent.py",
                   "program_dir": str(PROGRAM_DIR)},
        "budgets": budgets or {},
    }))
    return path


def _run(base_url: str, out: Path, variant: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTBENCH_API_KEY": PLANTED_KEY}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
           "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
           f"--agentbench-out={out}", "-k", TASK, f"--agentbench-variant={variant}",
           "--agentbench-base-url", base_url, "--agentbench-model", "some/model"]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def _record(out: Path) -> tuple[Path, dict[str, Any]]:
    (run_dir,) = run_dirs(out)
    (line,) = (run_dir / "attempts.jsonl").read_text().splitlines()
    return run_dir, json.loads(line)


def _script() -> list[Reply]:
    return [Reply("Let me look.\n```bash\ncat minilib/mathx.py\n```", usage=USAGE),
            Reply(f"Fix the divisor.\n```bash\n{FIX}```", usage=USAGE),
            Reply("```bash\npython -m pytest -q -p no:cacheprovider tests/test_mathx.py\n```",
                  usage=USAGE),
            Reply("The tests pass; done.", usage=USAGE)]


def test_a_program_in_the_sandbox_solves_the_task_through_the_gateway(
        tmp_path: Path, docker_client: Any) -> None:
    with FakeOpenAIServer(_script()) as server:
        proc = _run(server.base_url, tmp_path / "out", _variant(tmp_path))
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    run_dir, record = _record(tmp_path / "out")
    assert record["result"]["passed"] is True, record["result"]
    assert record["usage"]["llm_calls"] == 4
    assert record["usage"]["prompt_tokens"] == 4 * 900
    assert record["model"]["name"] == "some/model"
    # every call reached the upstream with the key, from the host
    assert len(requests) == 4
    assert all(r.headers.get("authorization") == f"Bearer {PLANTED_KEY}" for r in requests)
    first = requests[0].json["messages"][1]["content"]
    assert first.startswith("Task: ") and "tests/test_mathx.py" in first
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    kinds = [e["type"] for e in events if e.get("task_id") == TASK]
    assert kinds.count("llm_request") == 4 and kinds.count("llm_response") == 4, kinds
    # what the program saw inside: its environment and every process it could read
    seen = (run_dir / "tasks" / TASK / "logs" / "agent_program_stdout.txt").read_text()
    assert "ENV " in seen and "PROC " in seen and "DONE" in seen, seen[:3000]
    assert "OPENAI_BASE_URL" in seen and "127.0.0.1:8089" in seen
    leaks = [p for p in run_dir.rglob("*")
             if p.is_file() and PLANTED_KEY in p.read_text("utf-8", "replace")]
    assert leaks == []
    diff = (run_dir / "tasks" / TASK / "diffs" / "final.patch").read_text()
    assert "+    return sum(values) / len(values)" in diff


def test_a_budget_of_one_call_refuses_the_second_before_the_upstream(
        tmp_path: Path, docker_client: Any) -> None:
    with FakeOpenAIServer(_script()) as server:
        proc = _run(server.base_url, tmp_path / "out",
                    _variant(tmp_path, budgets={"max_steps": 1}))
        requests = list(server.requests)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    _, record = _record(tmp_path / "out")
    assert len(requests) == 1  # the second call never left the gateway
    assert record["usage"]["llm_calls"] == 1
    assert record["result"]["passed"] is False
    assert record["result"]["failure_reason"] == "AGENT_GAVE_UP", record["result"]
    assert record["result"]["sub_reason"] == "BUDGET_STEPS", record["result"]
