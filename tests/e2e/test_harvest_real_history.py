"""Issue 21: a real repository's history becomes tasks that the plugin runs (Docker).

`agentbench harvest` on the newest ten first-parent commits of hukkin/tomli (its full history is
../shared/repos/tomli.bundle): every commit accounted for in the funnel with exactly one reason,
validated tasks written with hidden tests, and then the plugin itself, run as a user would with
`--agentbench-taskpacks`, passes every harvested task under the oracle and fails every one under
nop. The full figures (both bundled histories, 670 commits) are in the README's harvest section.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.support.plugin_runs import ROOT, python_m_pytest, run_env

BUNDLE = ROOT.parent / "shared" / "repos" / "tomli.bundle"
RANGE = "HEAD~10..HEAD"


@pytest.fixture(scope="module")
def harvested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    if not BUNDLE.is_file():
        pytest.fail(f"{BUNDLE} is missing: the shared repositories sit beside the project")
    root = tmp_path_factory.mktemp("harvest")
    env = run_env(root / "home")
    out = root / "taskpacks"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_agentbench.cli.main", "harvest", str(BUNDLE),
         "--suite", "tomli", "--out", str(out), "--range", RANGE, "--gate-runs", "1",
         "--workers", "2"],
        cwd=root, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((out / "tomli" / "harvest_report.json").read_text("utf-8"))
    return out, report


def test_the_funnel_accounts_for_every_commit_once(
    harvested: tuple[Path, dict[str, object]],
) -> None:
    out, report = harvested
    commits = report["commits"]
    assert isinstance(commits, list)
    assert report["walked"] == len(commits) == 10
    assert len({c["sha"] for c in commits}) == 10
    assert all(c["reason"] for c in commits)  # exactly one reason each, never empty
    assert report["unexpected_reasons"] == {}
    reasons = Counter(c["reason"] for c in commits)
    tasks = sorted(p.parent.name for p in (out / "tomli").glob("*/task.yaml"))
    assert reasons["VALIDATED"] == len(tasks) >= 2, reasons
    for task in tasks:
        spec = (out / "tomli" / task / "task.yaml").read_text("utf-8")
        assert "hidden_tests: tests.patch" in spec
        assert (out / "tomli" / task / "oracle.patch").stat().st_size > 0


@pytest.mark.parametrize("variant", ["oracle", "nop"])
def test_the_plugin_runs_the_harvested_suite(
    harvested: tuple[Path, dict[str, object]], variant: str, tmp_path: Path
) -> None:
    out, report = harvested
    env = run_env(tmp_path / "home")
    done = subprocess.run(
        python_m_pytest(["-p", "no:cacheprovider", "--agentbench-suite", "tomli",
                         f"--agentbench-taskpacks={out}", f"--agentbench-out={tmp_path / 'o'}",
                         f"--agentbench-variant={variant}", "-n", "2"]),
        cwd=tmp_path, env={**env, "PYTHONDONTWRITEBYTECODE": "1"}, capture_output=True,
        text=True, timeout=1200)
    validated = report["validated"]
    summary = done.stdout.strip().splitlines()[-1]
    if variant == "oracle":
        assert done.returncode == 0, done.stdout[-4000:]
        assert f"{validated} passed" in summary, summary
    else:
        assert f"{validated} failed" in summary and "passed" not in summary, summary
    assert os.listdir(tmp_path / "o")
