"""Issue 10 item 3, end to end: two xdist workers that miss one env-cache key at the same time
build it once; the other waits, then uses what was built; both attempts are valid.

fix-mean-off-by-one gets a setup that takes a few seconds and leaves an ignored `.venv`-like tree
in the workspace; two attempts under the oracle with `-n 2` start together on a cold cache.
A third run is all hits and shows the warm setup phase.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tests.support.plugin_runs import TASKPACKS, PluginRunner

TASK = "fix-mean-off-by-one"
SETUP = ["sleep 4 && mkdir -p .venv/lib && echo '*' > .venv/.gitignore && echo ok > .venv/lib/m"]


def test_two_workers_build_one_cold_key_once(tmp_path: Path) -> None:
    packs = tmp_path / "taskpacks"
    shutil.copytree(TASKPACKS, packs)
    task_file = packs / "custom-dev" / TASK / "task.yaml"
    spec = yaml.safe_load(task_file.read_text())
    spec["setup"] = {"commands": SETUP}
    task_file.write_text(yaml.safe_dump(spec))
    cache = tmp_path / "env-cache"
    runner = PluginRunner(tmp_path)
    options = ("-n", "2", "--agentbench-attempts", "2", "-k", TASK,
               f"--agentbench-taskpacks={packs}", f"--agentbench-env-cache={cache}")

    cold = runner.run(*options, out=tmp_path / "cold")
    cold.assert_outcomes(passed=2)
    records = cold.run_dir.records()
    verdicts = sorted(r["setup"]["env_cache"] for r in records)
    assert verdicts in (["built", "hit_after_wait"], ["built", "hit"]), verdicts
    print(f"\ncold verdicts: {verdicts}")
    waiter = next(r for r in records if r["setup"]["env_cache"] != "built")
    assert waiter["result"]["passed"] and waiter["setup"]["ok"]
    assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 1

    warm = runner.run(*options, out=tmp_path / "warm")
    warm.assert_outcomes(passed=2)
    for record in warm.run_dir.records():
        assert record["setup"]["env_cache"] == "hit"
        print(f"warm setup phase: {record['setup']['duration_sec']} s")
        assert record["setup"]["duration_sec"] < 4, record["setup"]  # no setup command ran
