"""The context_packer variant end to end: pytest → Docker sandbox → a real OpenAI-compatible
HTTP server on loopback that answers by role and content.

The scripted model patches only when the first user message already carries the code the
failure points at (so the packing, not a read_file, is what it works from), then runs the
failing command and finishes once it passes. The run directory holds context_manifest.json."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from pytest_agentbench.schemas.records import AttemptRecord
from tests.fakes.openai_server import FakeOpenAIServer, Reply, tool_reply
from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]
TASK = "fix-mean-off-by-one"
TASK_DIR = ROOT / "taskpacks" / "custom-dev" / TASK
FAILING = "python -m pytest -q -p no:cacheprovider tests/test_mathx.py"
KEY = "sk-test-planted-0123456789abcdefXYZ"


def answer(request: dict[str, Any]) -> Reply:
    """The next step from the conversation so far (role and content), never from a counter."""
    messages = request["messages"]
    first_user = next(m["content"] for m in messages if m["role"] == "user")
    tools = [m for m in messages if m["role"] == "tool"]
    if "packed by context_packer" not in first_user or "def mean(values)" not in first_user:
        return tool_reply("finish", {"summary": "no packed code to work from"})
    if not tools:
        return tool_reply("apply_patch", {"unified_diff": (TASK_DIR / "oracle.patch").read_text()})
    last = tools[-1]["content"]
    if "exit_code: 0" in last:
        return tool_reply("finish", {"summary": "mean divides by len(values)"})
    return tool_reply("run", {"command": FAILING})


def prompt_tokens(request: dict[str, Any]) -> int:
    """The request's prompt estimated like the harness does: characters / 4."""
    chars = len(json.dumps(request["messages"])) + len(json.dumps(request.get("tools", [])))
    return chars // 4


def test_context_packer_solves_a_task_through_pytest(tmp_path: Path) -> None:
    with FakeOpenAIServer([], default=answer) as server:
        env = {**os.environ, "AGENTBENCH_API_KEY": KEY}
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
               "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
               f"--agentbench-out={tmp_path}", "-k", TASK, "--agentbench-variant",
               "context_packer", "--agentbench-base-url", server.base_url,
               "--agentbench-model", "some/model"]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
        requests = [r.json for r in server.requests]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (run_dir,) = run_dirs(tmp_path)
    [line] = (run_dir / "attempts.jsonl").read_text().splitlines()
    record = json.loads(line)
    AttemptRecord.model_validate(record)
    assert record["result"]["passed"] is True
    assert record["agent"]["finished_by"] == "finish"
    assert record["agent"]["changed_files"] == ["minilib/mathx.py"]
    assert record["usage"]["llm_calls"] == len(requests) == 3

    [manifest_path] = run_dir.rglob("context_manifest.json")
    assert manifest_path.parent == run_dir / "tasks" / TASK / "agent"
    data = json.loads(manifest_path.read_text())
    assert (data["version"], data["agent"], data["budget_tokens"]) == (1, "context_packer", 6000)
    [step] = data["packs"]
    included = [i for i in step["items"] if i["included"]]
    assert any(i["path"] == "minilib/mathx.py" and i["reason"].startswith("definition of mean")
               for i in included)
    assert 0 < step["used_tokens"] <= 6000
    assert step["used_tokens"] == sum(i["tokens"] for i in included)
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    [note] = [e for e in events if e["type"] == "note" and e.get("kind") == "context_packed"]
    assert note["data"]["used_tokens"] == step["used_tokens"]
    # the packer read through the recorded toolbox
    tools = [e.get("tool") for e in events if e["type"] == "tool_call_finished"]
    assert "list_files" in tools and "read_file" in tools

    sizes = [prompt_tokens(r) for r in requests]
    print(f"context_packer prompt tokens per call: {sizes}, median {statistics.median(sizes)}, "
          f"packed {step['used_tokens']} tokens in {len(included)} ranges")
