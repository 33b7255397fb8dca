"""`validation.expected_failing_tests` with a typo: the baseline says the test was not collected
and names the tests that did fail, instead of "did not fail" (issue 22 polish)."""

from __future__ import annotations

from pytest_agentbench.core.baseline import evaluate
from pytest_agentbench.core.evidence import parse
from pytest_agentbench.sandbox.port import ExecResult
from pytest_agentbench.schemas.task import ValidationSpec

OUTPUT = ("F.\n=== short test summary info ===\n"
          "FAILED tests/test_mathx.py::test_mean - assert 2 == 3\n1 failed, 1 passed in 0.01s\n")
JUNIT = """<testsuites><testsuite>
<testcase classname="tests.test_mathx" name="test_mean"><failure message="x"/></testcase>
<testcase classname="tests.test_mathx" name="test_sum"/>
</testsuite></testsuites>"""


def judge(expected: list[str], junit: bool = True) -> tuple[str | None, str]:
    spec = ValidationSpec(failing_command="pytest", passing_command="pytest",
                          expected_failing_tests=expected)
    runs = [ExecResult(1, OUTPUT, "", 10), ExecResult(1, OUTPUT, "", 10)]
    _, verdict = evaluate(spec, runs, parse(JUNIT) if junit else None)
    return verdict.sub_reason, verdict.summary


def test_a_misspelled_test_is_not_collected_with_the_tests_that_failed() -> None:
    sub, summary = judge(["tests/test_mathx.py::test_maen"])
    assert sub == "EXPECTED_TESTS_NOT_FAILING"
    assert summary == ("expected failing tests not collected: tests/test_mathx.py::test_maen "
                       "(did you mean tests/test_mathx.py::test_mean?); the tests that failed: "
                       "tests/test_mathx.py::test_mean")


def test_a_test_that_ran_and_passed_did_not_fail() -> None:
    _, summary = judge(["tests/test_mathx.py::test_mean", "tests/test_mathx.py::test_sum"])
    assert summary == ("expected failing tests did not fail (they ran and passed): "
                       "tests/test_mathx.py::test_sum; the tests that failed: "
                       "tests/test_mathx.py::test_mean")


def test_without_junit_results_it_cannot_tell_and_still_names_the_failures() -> None:
    _, summary = judge(["tests/test_mathx.py::test_maen"], junit=False)
    assert summary == ("expected failing tests did not fail: tests/test_mathx.py::test_maen; "
                       "the tests that failed: tests/test_mathx.py::test_mean")


def test_the_expected_tests_failing_is_a_valid_baseline() -> None:
    assert judge(["tests/test_mathx.py::test_mean"]) == (None, "")
