"""The LLM agent end to end: pytest → Docker sandbox → a real OpenAI-compatible HTTP server.

The server runs on loopback in this process; the pytest run under test is a subprocess that talks
to it over HTTP exactly as it would talk to OpenRouter or vLLM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentbench.schemas.records import AttemptRecord
from tests.fakes.openai_server import FakeOpenAIServer, Fault, json_in_content, tool_reply
from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]
TASK = "fix-mean-off-by-one"
TASK_DIR = ROOT / "taskpacks" / "custom-dev" / TASK
PLANTED_KEY = "sk-test-planted-0123456789abcdefXYZ"
USAGE = {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280, "cost": 0.0021}


def run_pytest(base_url: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTBENCH_API_KEY": PLANTED_KEY}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
           "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
           f"--agentbench-out={out}", "-k", TASK, "--agentbench-variant", "llm_v0",
           "--agentbench-base-url", base_url, "--agentbench-model", "some/model", *extra]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def only_record(out: Path) -> tuple[Path, dict]:
    (run_dir,) = run_dirs(out)
    lines = (run_dir / "attempts.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    AttemptRecord.model_validate(record)
    return run_dir, record


def solving_script(native: bool) -> list:
    patch = (TASK_DIR / "oracle.patch").read_text()
    call = tool_reply if native else (lambda name, args, **kw: json_in_content(name, args))
    return [
        Fault(429, retry_after="1", body='{"error": {"message": "slow down"}}'),
        call("read_file", {"path": "minilib/mathx.py"}, usage=USAGE),
        call("apply_patch", {"unified_diff": patch}, usage=USAGE),
        call("run", {"command": "python -m pytest -q -p no:cacheprovider tests/test_mathx.py"},
             usage=USAGE),
        call("finish", {"summary": "mean divides by len(values) again"}, usage=USAGE),
    ]


def test_llm_agent_solves_task_through_pytest(tmp_path: Path) -> None:
    with FakeOpenAIServer(solving_script(native=True)) as server:
        proc = run_pytest(server.base_url, tmp_path)
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    run_dir, record = only_record(tmp_path)
    assert record["result"]["passed"] is True
    usage, model = record["usage"], record["model"]
    assert usage["llm_calls"] == 4 and usage["retries"] == 1
    assert usage["prompt_tokens"] == 4 * 1200 and usage["completion_tokens"] == 4 * 80
    assert usage["cost_usd"] == pytest.approx(4 * 0.0021)
    assert usage["llm_latency_ms"] > 0
    assert model["name"] == "some/model" and model["prompt_version"].startswith("system_v1@sha256:")
    assert record["agent"]["finished_by"] == "finish"
    assert record["agent"]["changed_files"] == ["minilib/mathx.py"]
    # the key went to the server (host side) ...
    assert requests[-1].headers.get("authorization") == f"Bearer {PLANTED_KEY}"
    # ... and into no file of the run directory
    leaks = [p for p in run_dir.rglob("*") if p.is_file() and PLANTED_KEY in p.read_text("utf-8",
                                                                                        "replace")]
    assert leaks == []
    conversation = (run_dir / "tasks" / TASK / "agent" / "conversation.jsonl").read_text()
    assert "apply_patch" in conversation
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    kinds = {e["type"] for e in events}
    assert {"llm_request", "llm_response", "llm_retry", "tool_call_finished"} <= kinds


def test_llm_agent_with_tool_calls_as_text(tmp_path: Path) -> None:
    with FakeOpenAIServer(solving_script(native=False)) as server:
        proc = run_pytest(server.base_url, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    _, record = only_record(tmp_path)
    assert record["result"]["passed"] is True
    assert record["usage"]["fallback_tool_calls"] >= 3


def test_server_errors_until_exhaustion_are_llm_error(tmp_path: Path) -> None:
    with FakeOpenAIServer([Fault(500)] * 50, default=Fault(500)) as server:
        proc = run_pytest(server.base_url, tmp_path)
    assert proc.returncode == 10  # infrastructure (the provider failed), not the agent
    assert "LLM_ERROR" in proc.stdout and "Traceback" not in proc.stdout
    _, record = only_record(tmp_path)
    assert record["result"]["failure_reason"] == "LLM_ERROR"
    assert record["pytest_outcome"] == "error"


def test_replay_reproduces_recorded_pass(tmp_path: Path) -> None:
    with FakeOpenAIServer(solving_script(native=True)) as server:
        proc = run_pytest(server.base_url, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    run_dir, _ = only_record(tmp_path)
    replay = subprocess.run(
        [sys.executable, "-m", "pytest_agentbench.cli.main", "replay", "--run", str(run_dir),
         "--task", TASK, "--taskpacks", str(ROOT / "taskpacks")],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "reproduced" in replay.stdout.lower()

