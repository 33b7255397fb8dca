"""Issue 22 ("a user's first day with their own repository"): the plugin's blockers and its wrong
or misleading answers, each through a real plugin run on a tiny local pack (tests/support/
tiny_pack.py; local sandbox, so no Docker). Each test names the item it guards and failed on the
commit before its fix.
"""

from __future__ import annotations

import pytest

from tests.support.tiny_pack import Pack, attempts, output, run_suite


@pytest.fixture
def pack(pytester: pytest.Pytester) -> Pack:
    pack = Pack(pytester.path)
    pack.task("good-a")
    pack.task("good-b")
    return pack


def test_named_run_in_parallel(pytester: pytest.Pytester, pack: Pack) -> None:
    """Issue 22 item 1: `-n 2 --agentbench-run-name=X` ran nothing: the controller made
    reports/runs/X and every worker's settings check then refused the name as taken (exit 4,
    a traceback per worker). The workers take the controller's run; the run is recorded."""
    result = run_suite(pytester, "-n", "2", "--agentbench-run-name=nightly-a")
    text = output(result)
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    result.assert_outcomes(passed=2)
    run_dir = pytester.path / "reports" / "runs" / "nightly-a"
    assert sorted(r["task_id"] for r in attempts(run_dir)) == ["good-a", "good-b"]
