"""Issue 8 items 6 and 8 through the whole pipeline: a workspace over its disk limit and a sandbox
the agent tries to kill are the agent's failures, recorded with the call that caused them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.scripted_runs import run_agent


def tool_calls(task_dir: Path) -> list[dict]:
    lines = (task_dir / "agent" / "tool_calls.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_filling_git_past_the_disk_limit_is_the_agents_failure(tmp_path: Path) -> None:
    record, task_dir = run_agent(tmp_path, [
        {"tool": "run", "arguments": {
            "command": "dd if=/dev/urandom of=.git/junk bs=1M count=200 status=none"}},
        {"tool": "run", "arguments": {"command": "rm -f .git/junk"}},
    ], disk_limit_mb=64)
    (fill, _) = tool_calls(task_dir)
    assert fill["result"]["error_type"] == "LIMIT_EXCEEDED"
    assert fill["result"]["data"]["disk_limit_exceeded"] is True
    environment = json.loads((task_dir / "meta" / "environment.json").read_text())
    assert environment["disk_limit"]["mb"] == 64
    assert environment["disk_limit"]["repo"] in ("filesystem", "watched")
    assert record["result"]["failure_reason"] == "TESTS_FAILED", record["result"]


@pytest.mark.parametrize("command", ["kill -TERM 1", "kill -9 -1", "pkill -9 sleep; true"])
def test_killing_the_sandbox_is_refused_and_recorded(tmp_path: Path, command: str) -> None:
    record, task_dir = run_agent(tmp_path, [
        {"tool": "run", "arguments": {"command": command}},
        {"tool": "run", "arguments": {
            "command": "sed -i 's/(len(values) - 1)/len(values)/' minilib/mathx.py"}},
    ])
    calls = tool_calls(task_dir)
    assert [c["arguments"]["command"] for c in calls][0] == command
    # the sandbox survived, so the agent's real fix after the attempt still counts
    assert record["result"]["passed"] is True, record["result"]
