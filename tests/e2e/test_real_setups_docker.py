"""Issue 10 item 1: the bundled custom-setups suite through the plugin, in Docker, with -n 2.

Its tasks set themselves up the way real repositories do: a venv of their own with an editable
install (`venv-editable`, and `slow-setup-20s` with numpy, pandas and scipy), a plain
`pip install -e .` (`pip-editable`) and a plain `pip install <package>` (`plain-pip`), all from
PyPI under `network_policy: setup_only`. On 221295f (PIP_USER=1 in the runner image) the venv
tasks were SETUP_FAILED. Each must pass under the oracle and fail, for the tests, under nop.

The oracle run goes first in a HOME of its own (cold pip and environment caches, so every setup
really runs: about 40 s on two cores); the nop run follows in the same HOME, so each task's
environment is restored from the cache the oracle run filled (about 13 s instead of 36 s), and
the restored venvs and editable installs must still run the tests. Without a Docker daemon they
skip, except under CI=true.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.plugin_runs import TASKPACKS, PytestRun, run_env, run_pytest

SUITE = "custom-setups"
TASKS = ("pip-editable", "plain-pip", "slow-setup-20s", "venv-editable")
SETUP_COMMANDS = {"pip-editable": 1, "plain-pip": 1, "slow-setup-20s": 2, "venv-editable": 2}


def run_suite(root: Path, variant: str, home: Path) -> PytestRun:
    out = root / "runs"
    args = ["-p", "no:cacheprovider", "--agentbench-suite", SUITE,
            f"--agentbench-taskpacks={TASKPACKS}", f"--agentbench-out={out}",
            f"--agentbench-variant={variant}", "-n", "2"]
    return run_pytest(args, cwd=root, env=run_env(home), out=out, timeout=900)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("setups-home")


@pytest.fixture(scope="module")
def oracle_run(docker_client: Any, tmp_path_factory: pytest.TempPathFactory,
               home: Path) -> PytestRun:
    """Cold: the first run in `home`, so every setup runs from PyPI."""
    return run_suite(tmp_path_factory.mktemp("setups-oracle"), "oracle", home)


@pytest.fixture(scope="module")
def nop_run(oracle_run: PytestRun, tmp_path_factory: pytest.TempPathFactory,
            home: Path) -> PytestRun:
    """Warm: after the oracle run in the same `home`, so each task's environment is restored
    from the cache the oracle run filled (the venvs and editable installs must work restored)."""
    return run_suite(tmp_path_factory.mktemp("setups-nop"), "nop", home)


def check_setups(run: PytestRun, restored: bool) -> dict[str, dict[str, Any]]:
    """`restored`: every task's environment came from the cache (no command ran), or none did."""
    records = run.run_dir.records_by_task()
    assert sorted(records) == list(TASKS), run.tail()
    for task, record in records.items():
        setup = record["setup"]
        assert record["result"]["failure_reason"] != "SETUP_FAILED", (task, record["result"])
        assert setup["ok"], (task, setup)
        assert setup["reused_snapshot"] is restored, (task, setup)
        if not restored:  # a restored environment runs no command
            assert setup["network"] and setup["commands"] == SETUP_COMMANDS[task], (task, setup)
        assert not setup["dirty_files"], (task, setup)  # .venv, *.egg-info: ignored, not dirty
    return records


def test_every_task_passes_under_the_oracle(oracle_run: PytestRun) -> None:
    oracle_run.assert_outcomes(passed=len(TASKS))
    assert oracle_run.xdist_items == len(TASKS) and oracle_run.returncode == 0
    for task, record in check_setups(oracle_run, restored=False).items():
        assert record["result"]["passed"], (task, record["result"])
        assert record["pytest_outcome"] == "passed"


def test_every_task_fails_its_tests_under_nop(nop_run: PytestRun) -> None:
    nop_run.assert_outcomes(failed=len(TASKS))
    for task, record in check_setups(nop_run, restored=True).items():
        result = record["result"]
        assert result["failure_reason"] == "TESTS_FAILED", (task, result)
        assert result["tests_failed"] >= 1 and result["tests_passed"] >= 1, (task, result)
        assert record["baseline_validation"]["failed_as_expected"], task


def test_the_scanners_flag_nothing_under_the_oracle(oracle_run: PytestRun) -> None:
    """Issue 24 item 4 on this suite's oracle run (tests/e2e/test_scan_oracle.py scans the other
    bundled suites): its setups run once per session, not once more for the scan."""
    from tests.support.scan_runs import assert_no_finding

    assert_no_finding(oracle_run.run_dir.path)
