#!/usr/bin/env python3
"""The harness's own time per LLM-agent step, model latency excluded, measured in one run.

A loopback OpenAI-compatible server scripts N steps (alternating read_file and a cheap `run`)
against a real task in a Docker sandbox. Per step we report the agent phase's wall time minus the
model's latency, split into tool execution (sandbox) and the rest (loop, recording, diffs, events).

    uv run python scripts/bench_agent_step.py [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agentbench.agents.variants import Variant, agent_builder  # noqa: E402
from pytest_agentbench.core.trial import Trial  # noqa: E402
from pytest_agentbench.core.trial_config import TrialConfig  # noqa: E402
from pytest_agentbench.repos.mirror import MirrorCache  # noqa: E402
from pytest_agentbench.run.hostenv import trial_defaults  # noqa: E402
from pytest_agentbench.sandbox.docker import DockerSandboxFactory  # noqa: E402
from pytest_agentbench.sandbox.image import ensure_image  # noqa: E402
from pytest_agentbench.tasks.discovery import discover  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer, tool_reply  # noqa: E402

USAGE = {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    task = next(t for t in discover(ROOT / "taskpacks", ["custom-dev"]).tasks
                if t.id == "fix-mean-off-by-one")
    script = [tool_reply("read_file", {"path": "minilib/mathx.py"}, usage=USAGE) if i % 2 else
              tool_reply("run", {"command": "true"}, usage=USAGE) for i in range(args.steps)]
    script.append(tool_reply("finish", {"summary": "done"}, usage=USAGE))
    image = ensure_image(quiet=True)
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(script) as server:
        cfg = TrialConfig(
            run_id="bench-step", run_dir=Path(tmp) / "run", work_root=Path(tmp) / "work",
            variant="llm_v0", variant_config_hash="bench", image=image.name,
            image_id=image.image_id, harness_version="bench", **trial_defaults(),
            events_path=Path(tmp) / "events.jsonl",
        )
        variant = Variant("llm_v0", "llm_v0",
                          params={"max_steps": args.steps + 5, "stuck_after": 10 ** 6})
        agent = agent_builder(variant, llm_cli={"base_url": server.base_url,
                                                "model": "bench/model", "preset": "local"})()
        record = Trial(task, cfg, DockerSandboxFactory(), MirrorCache(), agent).run()
        events = [json.loads(line) for line in
                  (Path(tmp) / "events.jsonl").read_text().splitlines()]
    agent_ms = record.timings["agent"] * 1000
    llm_ms = record.usage.llm_latency_ms if record.usage else 0
    tool_ms = sum(e["duration_ms"] for e in events if e["type"] == "tool_call_finished")
    steps = record.usage.llm_calls if record.usage else 0
    print(f"steps (model calls): {steps}, tool calls: {record.agent.tool_calls}")
    print(f"agent phase {agent_ms:.0f} ms, model latency {llm_ms} ms, tool execution {tool_ms} ms")
    print(f"harness time per step, model excluded: {(agent_ms - llm_ms) / steps:.1f} ms "
          f"(tool execution {tool_ms / steps:.1f} ms, loop + recording + diffs "
          f"{(agent_ms - llm_ms - tool_ms) / steps:.1f} ms)")


if __name__ == "__main__":
    main()
