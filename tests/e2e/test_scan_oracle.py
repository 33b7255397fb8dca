"""The scanners (issue 24 item 4) flag nothing on the oracle's real attempts of every bundled
task: one plugin run, in Docker with -n 2, of every bundled suite but custom-setups, then
`agentbench report scan` over its run directory. custom-setups (its slow-setup-20s task alone
is most of a run of all suites) is scanned in tests/e2e/test_real_setups_docker.py over the
oracle run that module makes anyway, so its setups run once per test session, not twice. The
unit tests in tests/unit/test_scan.py show each rule firing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.test_real_setups_docker import SUITE as SCANNED_WITH_THE_SETUPS_RUN
from tests.support.plugin_runs import TASKPACKS, PluginRunner
from tests.support.scan_runs import assert_no_finding

ALL_SUITES = sorted(p.name for p in TASKPACKS.iterdir()
                    if p.is_dir() and not p.name.startswith("_"))
SUITES = [s for s in ALL_SUITES if s != SCANNED_WITH_THE_SETUPS_RUN]


def test_no_finding_on_the_oracle_of_every_bundled_task(docker_client: Any,
                                                         tmp_path: Path) -> None:
    assert SCANNED_WITH_THE_SETUPS_RUN in ALL_SUITES and len(SUITES) == len(ALL_SUITES) - 1
    extra = [arg for suite in SUITES[1:] for arg in ("--agentbench-suite", suite)]
    assert SUITES[0] == "custom-dev"  # PluginRunner's own suite
    run = PluginRunner(tmp_path).run("-n", "2", *extra, timeout=1200)
    run_dir = run.run_dir.path
    records = [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
    tasks = {r["task_id"] for r in records}
    bundled = {p.parent.name for s in SUITES for p in (TASKPACKS / s).glob("*/task.yaml")}
    assert tasks == bundled, (sorted(bundled - tasks), run.stdout[-2000:])
    assert sum(bool((r.get("result") or {}).get("passed")) for r in records) >= 11
    assert_no_finding(run_dir)
