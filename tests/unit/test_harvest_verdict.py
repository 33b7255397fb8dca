"""FAIL_TO_PASS, PASS_TO_PASS, flaky tests and feature tasks from per-test outcomes
(harvest/verdict.py): two runs before the fix, three after."""

from __future__ import annotations

from pytest_agentbench.harvest.runs import Runs
from pytest_agentbench.harvest.verdict import judge

A, B = "tests/test_x.py::test_a", "tests/test_x.py::TestY::test_b[1.5]"
C = "tests/test_x.py::test_c"
NEW = "tests/test_new.py::test_n"


def runs(pre: list[dict[str, str]], post: list[dict[str, str]], codes: list[int] | None = None
         ) -> Runs:
    return Runs(pre=pre, post=post, pre_exit=codes or [1] * len(pre))


def test_fail_to_pass_and_pass_to_pass() -> None:
    verdict = judge(runs([{A: "failed", B: "passed"}, {A: "error", B: "passed"}],
                         [{A: "passed", B: "passed"}] * 3))
    assert (verdict.fail_to_pass, verdict.pass_to_pass, verdict.flaky) == ((A,), (B,), ())
    assert verdict.kind == "bugfix" and verdict.reason is None
    assert verdict.baseline_failing == (A,)


def test_a_test_that_flips_is_dropped_and_the_candidate_stays() -> None:
    verdict = judge(runs([{A: "failed", B: "passed"}, {A: "failed", B: "failed"}],
                         [{A: "passed", B: "passed"}, {A: "passed", B: "failed"},
                          {A: "passed", B: "passed"}]))
    assert verdict.fail_to_pass == (A,) and verdict.flaky == (B,) and verdict.reason is None


def test_only_flaky_tests_drop_the_candidate_as_flaky() -> None:
    verdict = judge(runs([{A: "failed"}] * 2, [{A: "passed"}, {A: "failed"}, {A: "passed"}]))
    assert verdict.reason == "FLAKY_TESTS" and verdict.flaky == (A,) and not verdict.fail_to_pass


def test_nothing_goes_from_failing_to_passing() -> None:
    still_failing = judge(runs([{A: "failed", C: "passed"}] * 2, [{A: "failed", C: "passed"}] * 3))
    assert still_failing.reason == "NO_FAIL_TO_PASS" and still_failing.pass_to_pass == (C,)
    skipped = judge(runs([{A: "skipped"}] * 2, [{A: "passed"}] * 3))
    assert skipped.reason == "NO_FAIL_TO_PASS" and skipped.fail_to_pass == ()
    broken_by_fix = judge(runs([{A: "passed"}] * 2, [{A: "failed"}] * 3))
    assert broken_by_fix.reason == "NO_FAIL_TO_PASS" and broken_by_fix.pass_to_pass == ()


def test_a_test_whose_module_did_not_import_makes_a_feature_task() -> None:
    verdict = judge(runs([{"tests/test_new.py": "error"}] * 2, [{NEW: "passed"}] * 3, [2, 2]))
    assert verdict.fail_to_pass == (NEW,) and verdict.kind == "feature"
    assert verdict.baseline_failing == ()  # the baseline names the module, never the test


def test_nothing_collected_with_exit_2_is_a_feature_too() -> None:
    verdict = judge(runs([{}, {}], [{NEW: "passed"}] * 3, [2, 2]))
    assert verdict.kind == "feature" and verdict.fail_to_pass == (NEW,)


def test_a_test_absent_before_for_another_reason_is_not_fail_to_pass() -> None:
    verdict = judge(runs([{A: "failed"}] * 2, [{A: "passed", NEW: "passed"}] * 3))
    assert verdict.fail_to_pass == (A,) and NEW not in verdict.pass_to_pass
    assert verdict.kind == "bugfix"


def test_a_bug_fix_with_a_new_module_too_stays_a_bugfix() -> None:
    verdict = judge(runs([{A: "failed", "tests/test_new.py": "error"}] * 2,
                         [{A: "passed", NEW: "passed"}] * 3))
    assert verdict.kind == "bugfix" and verdict.fail_to_pass == (NEW, A)
    assert verdict.baseline_failing == (A,)


def test_why_the_sandbox_stage_stopped_is_the_reason() -> None:
    assert judge(Runs(reason="SETUP_FAILED", detail="exit 1")).reason == "SETUP_FAILED"
    assert judge(runs([{A: "failed"}] * 2, [{}, {}, {}])).reason == "TESTS_NOT_RUN"
