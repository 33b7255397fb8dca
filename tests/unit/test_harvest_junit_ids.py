"""pytest node ids from junit XML (harvest/junit_ids.py), on reports pytest itself wrote for a
small test tree: classes, nested classes, parameters with dots and slashes, a collection error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentbench.core.evidence import EvidenceError
from pytest_agentbench.harvest.junit_ids import node_outcomes
from pytest_agentbench.harvest.runs import test_command as harvest_command
from pytest_agentbench.harvest.setup_infer import SetupPlan

PLAN = SetupPlan(commands=(), test_env=(), network_policy="none", manifests=(), source="")

MODULE = '''
import pytest


def test_plain():
    pass


@pytest.mark.parametrize("value", ["a.b", 1.5, "x/y.z"])
def test_param(value):
    assert value != 1.5


class TestOuter:
    def test_method(self):
        assert False

    class TestInner:
        @pytest.mark.skip
        def test_deep(self):
            pass
'''


def junit_of(root: Path, *modules: str) -> str:
    """Run the harvest's own test command on `modules` under `root`; the junit XML it wrote."""
    report = root / "junit.xml"
    command = harvest_command(PLAN, list(modules)).replace("python ", f"{sys.executable} ", 1)
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    subprocess.run(f"{command} --rootdir=. -o junit_family=xunit2 --junitxml={report}",
                   shell=True, cwd=root, env=env, capture_output=True, check=False, timeout=120)
    return report.read_text()


def test_node_ids_round_trip_through_junit(tmp_path: Path) -> None:
    (tmp_path / "tests" / "sub.pkg").mkdir(parents=True)
    (tmp_path / "tests" / "test_x.py").write_text(MODULE)
    (tmp_path / "tests" / "sub.pkg" / "test_y.py").write_text("def test_y():\n    pass\n")
    (tmp_path / "tests" / "test_broken.py").write_text("import no_such_module\n")
    modules = ["tests/test_x.py", "tests/sub.pkg/test_y.py", "tests/test_broken.py"]
    outcomes = node_outcomes(junit_of(tmp_path, *modules), modules)
    assert outcomes == {
        "tests/test_x.py::test_plain": "passed",
        "tests/test_x.py::test_param[a.b]": "passed",
        "tests/test_x.py::test_param[1.5]": "failed",
        "tests/test_x.py::test_param[x/y.z]": "passed",
        "tests/test_x.py::TestOuter::test_method": "failed",
        "tests/test_x.py::TestOuter::TestInner::test_deep": "skipped",
        "tests/sub.pkg/test_y.py::test_y": "passed",
        # a collection error names the module only, and the other modules still ran
        "tests/test_broken.py": "error",
    }


def test_a_repeated_id_keeps_its_worst_outcome() -> None:
    xml = ('<testsuites><testsuite name="pytest">'
           '<testcase classname="tests.test_x" name="test_a"/>'
           '<testcase classname="tests.test_x" name="test_a"><error message="teardown"/>'
           '</testcase>'
           '<testcase classname="tests.test_x" name="test_a"/>'
           '</testsuite></testsuites>')
    assert node_outcomes(xml, ["tests/test_x.py"]) == {"tests/test_x.py::test_a": "error"}


def test_a_report_that_is_not_safe_junit_is_refused() -> None:
    with pytest.raises(EvidenceError):
        node_outcomes('<!DOCTYPE x [<!ENTITY a "b">]><testsuites/>', ["tests/test_x.py"])
