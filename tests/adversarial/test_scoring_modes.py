"""`validation.results` through the plugin (local sandbox): a task that demands junit results
its failing command never writes is the task's error at baseline, not a failure of every agent."""

from __future__ import annotations

import pytest

from tests.support.tiny_pack import SUITE, Pack, run_suite


@pytest.fixture
def pack(pytester: pytest.Pytester) -> Pack:
    return Pack(pytester.path)


def with_results(pack: Pack, task_id: str, mode: str) -> None:
    path = pack.task(task_id)
    text = path.read_text().replace("  passing_command:", f"  results: {mode}\n  passing_command:")
    path.write_text(text)


def test_junit_results_without_pytest_are_a_task_error(pytester: pytest.Pytester,
                                                       pack: Pack) -> None:
    with_results(pack, "wants-junit", "junit")
    with_results(pack, "exit-status", "exit_code")
    with_results(pack, "automatic", "auto")
    result = run_suite(pytester)
    result.assert_outcomes(passed=2, errors=1)
    text = result.stdout.str()
    assert "SETUP_FAILED [RESULTS_MISSING]" in text or "RESULTS_MISSING" in text
    assert f"{SUITE}/wants-junit" in text
