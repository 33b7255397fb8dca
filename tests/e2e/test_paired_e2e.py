"""Two real runs (oracle and nop) through pytest and Docker, then the paired report and the gate.

The statistics are unit-tested against statsmodels; this proves the same numbers come out of
records the plugin really wrote, and that the gate's exit code can drive a CI pipeline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from statsmodels.stats.contingency_tables import mcnemar

from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]
SELECT = "mean or slug or override or passes"  # 3 valid tasks and one invalid one


def run_variant(out: Path, variant: str) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
         "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
         f"--agentbench-out={out}", "-k", SELECT, f"--agentbench-variant={variant}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    (run_dir,) = run_dirs(out)
    return run_dir


def agentbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_agentbench.cli.main", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("paired")
    return run_variant(base / "oracle", "oracle"), run_variant(base / "nop", "nop")


def test_paired_report_on_real_runs(runs: tuple[Path, Path]) -> None:
    oracle, nop = runs
    proc = agentbench("report", "paired", "--run-a", str(oracle), "--run-b", str(nop),
                      "--method", "mcnemar", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["schema"] == "agentbench.paired"
    # 3 valid pairs, all discordant (oracle passes, nop fails); the invalid task is excluded
    assert report["table"] == {"both_pass": 0, "a_only": 3, "b_only": 0, "both_fail": 0}
    assert report["exclusions"]["invalid_or_flaky_tasks"] == 1
    assert report["mcnemar"]["exact"] is True
    expected = mcnemar([[0, 3], [0, 0]], exact=True, correction=True).pvalue
    assert abs(report["mcnemar"]["pvalue"] - expected) < 1e-12
    assert report["pass_rate_a"] == 1.0 and report["pass_rate_b"] == 0.0
    # every resample of 3 tasks shows -100 points; that is no evidence of a 100-point drop: the
    # interval is widened to the exact one (issue 26), which holds 0 as McNemar's p = 0.25 does
    assert report["bootstrap"]["ci_low"] == -1.0 and report["bootstrap"]["ci_high"] > 0
    assert "widened to the exact interval" in report["bootstrap"]["interval"]


def test_gate_fails_on_regression_and_passes_on_equal(runs: tuple[Path, Path]) -> None:
    oracle, nop = runs
    regress = agentbench("gate", "--baseline", str(oracle), "--candidate", str(nop),
                         "--max-drop", "0.05")
    assert regress.returncode == 1, regress.stdout + regress.stderr
    assert "REGRESSION" in regress.stdout
    same = agentbench("gate", "--baseline", str(oracle), "--candidate", str(oracle),
                      "--max-drop", "0.05")
    # a handful of tasks cannot show that a 5-point drop did not happen: inconclusive, exit 3
    assert same.returncode == 3, same.stdout + same.stderr
    assert "INCONCLUSIVE" in same.stdout and "agentbench plan" in same.stdout
    accepted = agentbench("gate", "--baseline", str(oracle), "--candidate", str(oracle),
                          "--max-drop", "0.05", "--inconclusive-ok")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr

