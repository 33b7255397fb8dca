"""Issue 8 item 3, end to end: code under test that forces the exit status, hides the expected
test or edits the judge must not pass. Each attack is a scripted agent run through pytest and the
Docker sandbox on a bundled task; every one of them PASSED on 4a9ba26.
"""

from __future__ import annotations

import pytest

from tests.e2e.test_anticheat import run_scripted

FIX_UNITS = (  # the oracle's fix of fix-parse-size-units, done by shell
    "sed -i 's/1000 \\*\\* 2/1024 ** 2/' minilib/units.py && "
    "sed -i 's/\\.strip()/.strip().lower()/' minilib/config.py"
)


def append(path: str, code: str) -> dict:
    return {"tool": "run", "arguments": {"command": f"printf '%s\\n' {code!r} >> {path}"}}


def test_exit_forced_at_import_does_not_pass(tmp_path) -> None:
    """`os._exit(0)` when the tests import the code: pytest never reports, the exit status is 0."""
    record = run_scripted(tmp_path, "fix-parse-size-units", [
        append("minilib/units.py", "import os; os._exit(0)"),
    ])
    assert record["result"]["passed"] is False
    assert record["result"]["failure_reason"] == "TESTS_FAILED"
    assert record["result"]["sub_reason"] == "RESULTS_MISSING"


def test_exit_status_rewritten_at_exit_does_not_pass(tmp_path) -> None:
    """An atexit hook turns pytest's exit 1 into 0 after it reported the failures."""
    record = run_scripted(tmp_path, "fix-parse-size-units", [
        append("minilib/units.py", "import atexit, os; atexit.register(lambda: os._exit(0))"),
    ])
    result = record["result"]
    assert result["passed"] is False
    assert result["sub_reason"] == "EXIT_STATUS_CONTRADICTS_RESULTS"
    assert result["tests_failed"] >= 1


def test_expected_test_skipped_by_the_code_does_not_pass(tmp_path) -> None:
    """The code under test skips the test that calls it: exit 0, the expected test never
    passed."""
    skip_mean = "def mean(*args, **kwargs):\n    import pytest\n    pytest.skip('not today')\n"
    record = run_scripted(tmp_path, "fix-mean-off-by-one", [
        {"tool": "run", "arguments": {
            "command": f"cat >> minilib/mathx.py <<'EOF'\n{skip_mean}EOF"}},
    ])
    result = record["result"]
    assert result["passed"] is False
    assert result["sub_reason"] == "EXPECTED_TESTS_NOT_PASSED"
    assert "tests/test_mathx.py::test_mean" in result["summary"]


@pytest.mark.parametrize("path, content", [
    ("conftest.py", "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
                    "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
                    "    outcome.get_result().outcome = 'passed'\n"),
    ("pytest.ini", "[pytest]\naddopts = --deselect tests/test_config.py::test_parse_size\n"),
    ("tests/test_config.py", "def test_nothing():\n    pass\n"),
])
def test_editing_the_judge_is_not_allowed(tmp_path, path: str, content: str) -> None:
    """Test infrastructure is read-only by default, however it is written (here by shell, which
    the tool API cannot refuse up front)."""
    record = run_scripted(tmp_path, "fix-parse-size-units", [
        {"tool": "run", "arguments": {"command": f"cat > {path} <<'EOF'\n{content}EOF"}},
    ])
    result = record["result"]
    assert result["passed"] is False
    assert (result["failure_reason"], result["sub_reason"]) == ("TOOL_ERROR", "EDIT_NOT_ALLOWED")
    assert path in result["summary"]


def test_a_real_fix_still_passes_with_evidence(tmp_path) -> None:
    record = run_scripted(tmp_path, "fix-parse-size-units", [
        {"tool": "run", "arguments": {"command": FIX_UNITS}},
    ])
    result = record["result"]
    assert result["passed"] is True, result
    assert result["tests_failed"] == 0 and result["tests_passed"] >= 5
