"""The scanners (issue 24 item 4) flag nothing on the oracle's real attempts of every bundled
task: one plugin run of the four bundled suites in Docker with -n 2, then `agentbench report
scan` over its run directory (the unit tests in tests/unit/test_scan.py show each rule firing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.plugin_runs import TASKPACKS, PluginRunner

SUITES = sorted(p.name for p in TASKPACKS.iterdir() if p.is_dir() and not p.name.startswith("_"))


def test_no_finding_on_the_oracle_of_every_bundled_task(docker_client: Any,
                                                         tmp_path: Path) -> None:
    extra = [arg for suite in SUITES[1:] for arg in ("--agentbench-suite", suite)]
    run = PluginRunner(tmp_path).run("-n", "2", *extra, timeout=1200)
    run_dir = run.run_dir.path
    records = [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
    tasks = {r["task_id"] for r in records}
    bundled = {p.parent.name for s in SUITES for p in (TASKPACKS / s).glob("*/task.yaml")}
    assert tasks == bundled, (sorted(bundled - tasks), run.stdout[-2000:])
    assert sum(bool((r.get("result") or {}).get("passed")) for r in records) >= 12
    proc = subprocess.run([sys.executable, "-m", "pytest_agentbench.cli.main", "report", "scan",
                           str(run_dir), "--format", "json", "--fail-on-suspicious"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["findings"] == []
