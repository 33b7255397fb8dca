"""The agent's clock starts when the agent gets control (issue 9 item 7): an attempt whose setup
is served from the environment cache gives the agent the same time as one that ran setup, and
the record says what the agent had and how long setup and baseline took.

Two attempts of one task on the local sandbox share an env cache: the first runs a setup that
sleeps SETUP_SEC (a miss, then saved), the second restores it (a hit). The agent in both needs
AGENT_WORK_SEC of its TIMEOUT_SEC: with the old clock, started with the attempt, the miss left
it less than that and its command was cut short.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from pytest_agentbench.agents.port import AgentContext, AgentOutcome
from pytest_agentbench.core.envcache import EnvCache
from pytest_agentbench.core.pipeline import AttemptPipeline
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.sandbox.local import LocalSandboxFactory
from pytest_agentbench.tasks.loader import load_task
from tests.support.attempts import attempt_config

ROOT = Path(__file__).resolve().parents[2]
TASK = "fix-mean-off-by-one"
SETUP_SEC, AGENT_WORK_SEC, TIMEOUT_SEC = 6, 4, 8
FIX = "sed -i 's/(len(values) - 1)/len(values)/' minilib/mathx.py"


class SleepThenFix:
    """Works AGENT_WORK_SEC in one command, then fixes the bug; notes the time it was given."""

    name = "sleep-then-fix"

    def __init__(self) -> None:
        self.remaining_at_start = 0.0
        self.result: dict[str, Any] = {}

    def run(self, ctx: AgentContext) -> AgentOutcome:
        self.remaining_at_start = ctx.remaining()
        result = ctx.toolbox.call("run", {"command": f"sleep {AGENT_WORK_SEC} && {FIX}"})
        self.result = result.to_dict()
        return AgentOutcome("finish")


def attempt(tmp_path: Path, index: int) -> tuple[dict[str, Any], SleepThenFix]:
    packs = tmp_path / "taskpacks"
    if not packs.exists():
        shutil.copytree(ROOT / "taskpacks", packs)
        task_file = packs / "custom-dev" / TASK / "task.yaml"
        spec = yaml.safe_load(task_file.read_text())
        spec["environment"]["timeout_sec"] = TIMEOUT_SEC
        spec["setup"] = {"commands": [f"sleep {SETUP_SEC}"]}
        task_file.write_text(yaml.safe_dump(spec))
    task = load_task(packs / "custom-dev" / TASK / "task.yaml")
    run_dir = tmp_path / "run"
    cfg = attempt_config(tmp_path, "clock", run_dir=run_dir, attempt_index=index,
                         attempt_label=f"attempt{index + 1}",
                         env_cache=EnvCache(tmp_path / "env-cache"))
    agent = SleepThenFix()
    record = AttemptPipeline(task, cfg, LocalSandboxFactory(), MirrorCache(tmp_path / "git"),
                             agent).run()
    return record.to_json_dict(), agent


def test_a_cache_hit_gives_the_agent_the_same_time_as_a_miss(tmp_path: Path) -> None:
    started = time.monotonic()
    miss, miss_agent = attempt(tmp_path, 0)
    hit, hit_agent = attempt(tmp_path, 1)
    print(f"\nagent's time at its start: miss {miss_agent.remaining_at_start:.2f}s, "
          f"hit {hit_agent.remaining_at_start:.2f}s; setup miss {miss['setup']['duration_sec']}s, "
          f"hit {hit['setup']['duration_sec']}s; both attempts {time.monotonic() - started:.1f}s")
    assert not miss["setup"]["reused_snapshot"] and hit["setup"]["reused_snapshot"]
    assert miss["setup"]["duration_sec"] >= SETUP_SEC > hit["setup"]["duration_sec"]
    for record, agent in ((miss, miss_agent), (hit, hit_agent)):
        assert record["limits"]["agent_time_limit_sec"] == TIMEOUT_SEC
        assert record["limits"]["timeout_sec"] == TIMEOUT_SEC
        assert record["baseline_validation"]["duration_sec"] > 0
        # the agent was not cut short: all of its time, its command ran, its fix counts
        assert TIMEOUT_SEC - 0.5 < agent.remaining_at_start <= TIMEOUT_SEC
        assert agent.result["ok"] and agent.result["exit_code"] == 0, agent.result
        assert record["result"]["passed"], record["result"]
    assert abs(miss_agent.remaining_at_start - hit_agent.remaining_at_start) < 0.5
