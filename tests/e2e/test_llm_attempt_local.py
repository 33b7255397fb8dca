"""The llm_v0 agent through the real attempt pipeline (local sandbox), then replayed without the
model: a bundled custom-dev task solved by scripted replies from a fake OpenAI-compatible server
on loopback. A whole task run (about half a minute), hence e2e; the loop itself is tested in
tests/unit/test_llm_agent.py.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from pytest_agentbench.agents.variants import Variant, agent_builder
from pytest_agentbench.text.redaction import Redactor
from tests.fakes.openai_server import FakeOpenAIServer, Reply, Step, json_in_content, tool_reply
from tests.support.attempts import attempt_config

KEY = "sk-test-PLANTED0123456789abcdefXYZ"


def test_solves_a_custom_dev_task_through_the_pipeline_and_replay_reproduces_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_agentbench.cli.replay import run_replay
    from pytest_agentbench.core.pipeline import AttemptPipeline
    from pytest_agentbench.core.rundir import append_jsonl
    from pytest_agentbench.repos.mirror import MirrorCache
    from pytest_agentbench.sandbox.local import LocalSandboxFactory
    from pytest_agentbench.tasks.loader import load_task

    taskpacks = Path(__file__).resolve().parents[2] / "taskpacks"
    task = load_task(taskpacks / "custom-dev" / "fix-mean-off-by-one" / "task.yaml")
    monkeypatch.setenv("AGENTBENCH_API_KEY", KEY)
    monkeypatch.setenv("AGENTBENCH_GIT_CACHE", str(tmp_path / "git"))
    usage = {"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940, "cost": 0.0012}
    steps: list[Step] = [
        Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "minilib/mathx.py"}}],
              usage=usage),
        json_in_content("apply_patch", {"unified_diff": (task.task_dir / "oracle.patch")
                                        .read_text()}),  # a text-only call in the middle
        tool_reply("run", {"command": task.spec.validation.failing_command}),
        tool_reply("finish", {"summary": "mean divides by len(values)"}),
    ]
    run_dir, redactor = tmp_path / "run", Redactor()
    with FakeOpenAIServer(steps) as srv:
        cfg = attempt_config(tmp_path, "run-1", run_dir=run_dir, variant="baseline",
                             redact=redactor.redact)
        variant = Variant("baseline", "llm_v0", model={
            "preset": "openrouter", "name": "some/model", "base_url": srv.base_url})
        agent = agent_builder(variant, redactor=redactor)()
        record = AttemptPipeline(task, cfg, LocalSandboxFactory(), MirrorCache(tmp_path / "git"),
                       agent).run().to_json_dict()
    assert record["result"]["passed"], record["result"]
    assert record["agent"]["finished_by"] == "finish"
    assert record["usage"]["llm_calls"] == 4 and record["usage"]["fallback_tool_calls"] == 1
    assert record["usage"]["cost_usd"] == pytest.approx(0.0012)
    assert record["model"]["prompt_version"].startswith("system_v1@sha256:")
    for path in run_dir.rglob("*"):
        assert not path.is_file() or KEY not in path.read_text(errors="replace"), path
    append_jsonl(run_dir / "attempts.jsonl", record)

    args = argparse.Namespace(run=run_dir, out=None, task=task.id, attempt=None,
                              taskpacks=taskpacks, sandbox="local", image=None,
                              git_cache=tmp_path / "git")
    assert run_replay(args) == 0
    assert "REPRODUCED" in capsys.readouterr().out
    [replay] = list((run_dir / "replays").glob("*/replay.json"))
    assert json.loads(replay.read_text())["tool_calls"] == 4
