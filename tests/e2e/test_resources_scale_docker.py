"""--agentbench-resources-scale 0.5 through pytest and Docker, on one task: the record carries the
halved memory and CPU limits, the container had them (the kernel's cgroup files, read by the
agent's own command, and the create arguments the sandbox facts record), and an allocation past
the halved limit is counted as an OOM kill."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.scripted_runs import run_agent

MEM_MB, CPU = 1024, 1.0  # fix-mean-off-by-one's own limits
CGROUP = ("cat /sys/fs/cgroup/memory.max 2>/dev/null || "
          "cat /sys/fs/cgroup/memory/memory.limit_in_bytes; "
          "cat /sys/fs/cgroup/cpu.max 2>/dev/null || "
          "echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) "
          "$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)")
# 700 MiB, touched: under the task's 1024 MiB, past the halved 512 MiB
HOG = "python3 -c \"b = bytearray(700 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096])\""
FIX = "sed -i 's/(len(values) - 1)/len(values)/' minilib/mathx.py"


def _calls(task_dir: Path) -> list[dict[str, Any]]:
    lines = (task_dir / "agent" / "tool_calls.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_halved_run_records_and_applies_the_halved_limits(docker_client: Any,
                                                             tmp_path: Path) -> None:
    record, task_dir = run_agent(tmp_path, [
        {"tool": "run", "arguments": {"command": CGROUP}},
        {"tool": "run", "arguments": {"command": HOG}},
        {"tool": "run", "arguments": {"command": FIX}},
    ], "--agentbench-resources-scale", "0.5")
    limits = record["limits"]
    assert (limits["mem_limit_mb"], limits["cpu_limit"], limits["resources_scale"]) == (
        MEM_MB // 2, CPU / 2, 0.5)
    assert (limits["pids_limit"], limits["mem_reservation_mb"]) == (512, None)  # not scaled
    cgroup, hog, _ = _calls(task_dir)
    memory, cpu = cgroup["result"]["stdout"].split("\n", 1)
    assert int(memory) == MEM_MB // 2 * 1024 * 1024  # what the kernel enforces
    quota, period = cpu.split()
    assert int(quota) / int(period) == CPU / 2
    assert hog["result"]["data"]["oom_killed"] is True and hog["result"]["exit_code"] == 137
    assert limits["oom_kills"] == 1
    assert record["result"]["passed"] is True, record["result"]
    environment = json.loads((task_dir / "meta" / "environment.json").read_text())
    made = {box["phase"]: box["facts"]["create_args"] for box in environment["sandboxes"]}
    assert made["agent"]["mem_limit"] == f"{MEM_MB // 2}m"
    assert made["agent"]["nano_cpus"] == int(CPU / 2 * 1e9)
    assert made["score"]["mem_limit"] == f"{MEM_MB // 2}m"
    run_json = json.loads((task_dir.parents[1] / "run.json").read_text())
    assert run_json["config"]["resources_scale"] == 0.5
