"""Issue 8 item 3, unit level: the verdict needs evidence the code under test cannot forge by
printing or by forcing the exit status, and the test infrastructure is read-only by default."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentbench.agents.port import AgentOutcome
from pytest_agentbench.core.evidence import EvidenceError, junit_id, parse, runs_pytest
from pytest_agentbench.core.protection import Protection, protect, pytest_config_change
from pytest_agentbench.core.scoring import HARNESS_KILL, ScoringEvidence, sandbox_exit, verdict
from pytest_agentbench.paths.globs import matches_any
from pytest_agentbench.paths.host_files import HostFiles
from pytest_agentbench.sandbox.port import ExecResult, SandboxExited

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0"
failures="{failures}" skipped="0" tests="3"><testcase classname="tests.test_mathx" name="test_mean"
time="0.001">{mean_child}</testcase><testcase classname="tests.test_mathx.TestMedian"
name="test_even[2-3]" time="0.001"/><testcase classname="tests.test_text" name="test_title"
time="0.001"/></testsuite></testsuites>"""


def junit(mean_fails: bool = False) -> str:
    child = '<failure message="assert 1 == 2">boom</failure>' if mean_fails else ""
    return JUNIT.format(failures=int(mean_fails), mean_child=child)


def ok(code: int = 0) -> ExecResult:
    return ExecResult(exit_code=code, stdout="", stderr="", duration_ms=5)


def test_junit_ids_follow_pytest_mangling() -> None:
    assert junit_id("tests/test_mathx.py::test_mean") == "tests.test_mathx.test_mean"
    assert junit_id("tests/test_mathx.py::TestMedian::test_even[2-3]") == (
        "tests.test_mathx.TestMedian.test_even[2-3]"
    )
    assert junit_id("tests/test_x.py::test_p[a/b.py]") == "tests.test_x.test_p[a/b.py]"


def test_parse_counts_and_outcomes() -> None:
    results = parse(junit(mean_fails=True))
    assert (results.tests, results.failed, results.errors, results.passed) == (3, 1, 0, 2)
    assert results.outcome_of("tests/test_mathx.py::test_mean") == "failed"
    assert results.outcome_of("tests/test_mathx.py::TestMedian::test_even[2-3]") == "passed"
    assert results.outcome_of("tests/test_mathx.py::test_missing") is None


@pytest.mark.parametrize("text", [
    "not xml", "<html/>",
    '<!DOCTYPE x [<!ENTITY a "aaaa">]><testsuites>&a;</testsuites>',
])
def test_unreadable_results_are_refused(text: str) -> None:
    with pytest.raises(EvidenceError):
        parse(text)


def test_exit_zero_without_required_results_fails() -> None:
    """`os._exit(0)` at import: pytest never reports, the exit status says 0."""
    result = verdict(ok(), AgentOutcome("finish"), None, False,
                     ScoringEvidence(results_required=True))
    assert not result.passed
    assert (result.failure_reason, result.sub_reason) == ("TESTS_FAILED", "RESULTS_MISSING")


def test_exit_zero_contradicted_by_results_fails() -> None:
    """An atexit hook turns pytest's exit 1 into 0 after the junit file was written."""
    evidence = ScoringEvidence(results=parse(junit(mean_fails=True)), results_required=True)
    result = verdict(ok(), AgentOutcome("finish"), None, False, evidence)
    assert not result.passed
    assert result.sub_reason == "EXIT_STATUS_CONTRADICTS_RESULTS"
    assert (result.tests_passed, result.tests_failed) == (2, 1)


def test_expected_tests_must_be_collected_and_pass() -> None:
    evidence = ScoringEvidence(
        results=parse(junit()), results_required=True,
        expected_tests=("tests/test_mathx.py::test_mean", "tests/test_mathx.py::test_gone"),
    )
    result = verdict(ok(), AgentOutcome("finish"), None, False, evidence)
    assert not result.passed
    assert result.sub_reason == "EXPECTED_TESTS_NOT_PASSED"
    assert "test_gone (not run)" in result.summary
    passing = ScoringEvidence(results=parse(junit()),
                              expected_tests=("tests/test_mathx.py::test_mean",))
    assert verdict(ok(), AgentOutcome("finish"), None, False, passing).passed


def test_exit_status_alone_when_results_are_not_required() -> None:
    assert verdict(ok(), AgentOutcome("finish"), None, False, ScoringEvidence()).passed
    assert not verdict(ok(1), AgentOutcome("finish"), None, False, ScoringEvidence()).passed


def test_runs_pytest() -> None:
    assert runs_pytest("python -m pytest -q tests")
    assert runs_pytest("cd src && py.test")
    assert runs_pytest("pytest")
    assert not runs_pytest("make test")
    assert not runs_pytest("python -m pytest_agentbench_helper")


def make_repo(root: Path) -> HostFiles:
    for path, text in {
        "tests/unit/test_a.py": "def test_a(): pass\n",
        "tests/data/expected.json": "{}\n",
        "src/pkg/core.py": "X = 1\n",
        "src/pkg/tests_helpers.py": "Y = 1\n",
        "src/pkg/test_core.py": "def test_x(): pass\n",
        "checks.py": "print('ok')\n",
        "value.txt": "bad\n",
    }.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return HostFiles(root)


def readonly(protection: Protection, path: str) -> bool:
    return path in protection.paths or matches_any(path, protection.globs)


def test_protection_covers_the_tests_not_the_code_under_test(tmp_path: Path) -> None:
    files = make_repo(tmp_path)
    found = protect(["python -m pytest -q -p no:cacheprovider --cov src tests/unit/test_a.py::t",
                     "python checks.py && python -m pytest src/ tests ."], files)
    for path in ("tests/unit/test_a.py", "tests/data/expected.json", "src/pkg/test_core.py",
                 "checks.py", "conftest.py", "sub/dir/conftest.py", "pytest.ini",
                 "tests/pytest.ini", "pytest.toml", "sub/.pytest.toml", "tox.ini",
                 "sitecustomize.py", "pytest.py", "_pytest/main.py"):
        assert readonly(found, path), path
    for path in ("src/pkg/core.py", "src/pkg/tests_helpers.py", "value.txt",
                 "test_repro.py", "src/pkg/test_new.py", "tests/unit/test_new.py"):
        assert not readonly(found, path), path  # code under test, and files the agent adds


def test_plain_commands_protect_only_what_they_run(tmp_path: Path) -> None:
    files = make_repo(tmp_path)
    found = protect(
        ["make check", "python checks.py", "cd src && make -C src", "grep -qx good value.txt"],
        files)
    assert readonly(found, "checks.py") and not readonly(found, "src/pkg/test_core.py")
    assert not readonly(found, "value.txt") and not readonly(found, "src/pkg/core.py")


def test_unittest_modules_are_protected(tmp_path: Path) -> None:
    files = make_repo(tmp_path)
    (tmp_path / "tests" / "check_things.py").write_text("import unittest\n")
    found = protect(["python -m unittest tests.check_things"], files)
    assert readonly(found, "tests/check_things.py") and readonly(found, "tests/unit/test_a.py")


def test_sandbox_exit_blame() -> None:
    def exited(code: int | None, oom: bool = False, status: str | None = None) -> SandboxExited:
        return SandboxExited("stopped", exit_code=code, oom_killed=oom, status=status)

    assert sandbox_exit("agent", exited(0), "x")[:2] == ("TIMEOUT", "LIFETIME")
    assert sandbox_exit("agent", exited(137), "x")[:2] == ("SANDBOX_ERROR", "SANDBOX_EXITED")
    assert sandbox_exit("agent", exited(137, oom=True), "x")[:2] == ("AGENT_KILLED_SANDBOX", "OOM")
    assert sandbox_exit("score", exited(None, status=HARNESS_KILL), "x")[0] == (
        "AGENT_KILLED_SANDBOX")
    assert sandbox_exit("setup", exited(137, oom=True), "x")[:2] == (
        "SETUP_FAILED", "SANDBOX_EXITED")


def test_expected_ids_match_across_rootdir_and_cwd() -> None:
    results = parse(junit())
    assert results.outcome_of("pkg/tests/test_mathx.py::test_mean") == "passed"  # rootdir pkg/
    sub = parse(junit().replace('classname="tests.test_mathx"', 'classname="sub.tests.test_mathx"'))
    assert sub.outcome_of("tests/test_mathx.py::test_mean") == "passed"  # cd sub && pytest


def test_a_baseline_failure_that_is_skipped_now_does_not_pass() -> None:
    skipped = junit().replace('time="0.001"></testcase>', 'time="0.001"><skipped/></testcase>', 1)
    results = parse(skipped)
    assert results.outcomes["tests.test_mathx.test_mean"] == "skipped"
    evidence = ScoringEvidence(results=results, baseline_failing=("tests.test_mathx.test_mean",))
    result = verdict(ok(), AgentOutcome("finish"), None, False, evidence)
    assert result.sub_reason == "EXPECTED_TESTS_NOT_PASSED"
    gone = ScoringEvidence(results=parse(junit()), baseline_failing=("tests.test_gone.test_x",))
    assert verdict(ok(), AgentOutcome("finish"), None, False, gone).passed


def test_a_deeply_nested_pyproject_is_unparseable_not_a_crash(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir(), after.mkdir()
    (before / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-q"\n')
    (after / "pyproject.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    change = pytest_config_change(HostFiles(before), HostFiles(after), ["pyproject.toml"])
    assert change and "pyproject.toml" in change


def test_pytest_section_of_pyproject_is_protected(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    for root in (before, after):
        root.mkdir()
        (root / "setup.cfg").write_text("[metadata]\nname = x\n")
    base = '[project]\nname = "x"\nversion = "1"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n'
    (before / "pyproject.toml").write_text(base)
    (after / "pyproject.toml").write_text(base.replace('version = "1"', 'version = "2"'))
    b, a = HostFiles(before), HostFiles(after)
    assert pytest_config_change(b, a, ["pyproject.toml"]) is None
    (after / "pyproject.toml").write_text(base.replace('"-q"', '"-q -k not test_mean"'))
    assert "pytest configuration in pyproject.toml" in (
        pytest_config_change(b, a, ["pyproject.toml"]) or "")
    (after / "setup.cfg").write_text("[metadata]\nname = x\n[tool:pytest]\naddopts = -x\n")
    assert "setup.cfg" in (pytest_config_change(b, a, ["setup.cfg"]) or "")
