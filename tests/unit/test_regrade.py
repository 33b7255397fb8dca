"""--agentbench-regrade: the decision (core/regrade.py), what is regraded, the option's parsing
and where the setting is recorded. The regrade runs themselves, in sandboxes, are tested in
tests/e2e/test_regrade_e2e.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.core.regrade import PASS_FAIL_MIX, decide, gradable, hash_seed, run_record
from pytest_agentbench.run.settings import build_settings
from pytest_agentbench.run.state import config_hash, run_config
from pytest_agentbench.run.verdict import Tally, category
from pytest_agentbench.sandbox.port import ExecResult
from pytest_agentbench.schemas.records import AttemptRecord, RegradeRun, Result
from pytest_agentbench.schemas.taxonomy import Reason
from tests.support.synthetic import make_record as synthetic_record

FAILING = ["FAILED tests/test_tags.py::test_format_tags"]
PASSED = Result(passed=True, exit_code=0, summary="passing_command exited 0; 12 passed",
                tests_passed=12, tests_failed=0)
FAILED = Result(passed=False, exit_code=1, failure_reason=Reason.TESTS_FAILED,
                signature=FAILING, tests_passed=11, tests_failed=1)


def make_record(task_id: str, passed: bool, reason: str | None = None) -> dict[str, Any]:
    return synthetic_record("run", task_id, "suite", "v", 0, 1, passed, reason, 3, 10.0)


def run(index: int, passed: bool) -> RegradeRun:
    return RegradeRun(index=index, hash_seed=hash_seed(index), passed=passed,
                      exit_code=0 if passed else 1, signature=[] if passed else FAILING,
                      duration_sec=0.5, wall_sec=1.5)


# --------------------------------------------------------------------------- the decision


@pytest.mark.parametrize("graded", [PASSED, FAILED])
def test_regrades_that_agree_change_nothing_but_the_runs_recorded(graded: Result) -> None:
    runs = [run(i, graded.passed) for i in (1, 2, 3)]
    result = decide(graded, runs)
    assert result.regrades == runs
    assert result.model_dump(exclude={"regrades"}) == graded.model_dump(exclude={"regrades"})


def test_no_regrade_is_no_change() -> None:
    assert decide(PASSED, []) == PASSED


def test_a_pass_that_a_regrade_fails_is_verifier_flaky() -> None:
    runs = [run(1, False), run(2, True), run(3, False)]
    result = decide(PASSED, runs)
    assert (result.passed, result.failure_reason, result.sub_reason) == (
        False, Reason.VERIFIER_FLAKY, PASS_FAIL_MIX)
    assert result.regrades == runs
    assert result.signature == FAILING  # the failing regrade's: what disagreed
    assert (result.exit_code, result.tests_passed, result.tests_failed) == (0, 12, 0)
    assert result.summary == (
        "passing_command disagrees with itself on the final state: passed with "
        "PYTHONHASHSEED=0 (the grading), 2; failed with 1, 3")


def test_a_fail_that_a_regrade_passes_is_verifier_flaky_too() -> None:
    result = decide(FAILED, [run(1, False), run(2, True)])
    assert result.failure_reason == Reason.VERIFIER_FLAKY and not result.passed
    assert result.signature == FAILING  # the grading's own
    assert "passed with PYTHONHASHSEED=2; failed with 0 (the grading), 1" in result.summary


def test_verifier_flaky_counts_as_flaky_not_against_the_agent() -> None:
    flaky = make_record("t1", passed=False, reason="VERIFIER_FLAKY")
    passed = make_record("t2", passed=True)
    assert category(flaky) == "flaky"
    tally = Tally()
    for record in (flaky, passed):
        tally.add(record)
    assert (tally.scored, tally.passed, tally.pass_rate) == (1, 1, 1.0)
    assert tally.task_reasons == {"VERIFIER_FLAKY": 1}


# --------------------------------------------------------------------------- what is regraded


def command(**kwargs: Any) -> ExecResult:
    return ExecResult(**{"exit_code": 1, "stdout": "", "stderr": "", "duration_ms": 2500,
                         **kwargs})


def test_only_a_verdict_the_passing_command_decided_is_regraded() -> None:
    assert gradable(command(exit_code=0), None)
    assert gradable(command(exit_code=1), None)  # failed tests: regraded too
    assert not gradable(command(exit_code=0), "edited tests/conftest.py")  # the rules decided
    assert not gradable(command(exit_code=124, timed_out=True), None)
    assert not gradable(command(exit_code=1, disk_limit_exceeded=True), None)


def test_a_run_record_keeps_the_seed_the_exit_code_the_duration_and_the_signature() -> None:
    failed = run_record(2, command(exit_code=1), FAILED.model_copy(
        update={"sub_reason": "EXPECTED_TESTS_NOT_PASSED"}), 3.21449)
    assert failed.model_dump() == {
        "index": 2, "hash_seed": "2", "passed": False, "exit_code": 1, "timed_out": False,
        "sub_reason": "EXPECTED_TESTS_NOT_PASSED", "signature": FAILING,
        "duration_sec": 2.5, "wall_sec": 3.214}
    gave_up = FAILED.model_copy(update={"failure_reason": Reason.AGENT_GAVE_UP,
                                        "sub_reason": "MAX_STEPS"})
    assert run_record(3, command(exit_code=1), gave_up, 1.0).sub_reason is None  # the agent's
    passed = run_record(1, command(exit_code=0), PASSED, 1.0)
    assert (passed.passed, passed.signature, passed.sub_reason) == (True, [], None)
    assert [hash_seed(i) for i in (1, 2, 3)] == ["1", "2", "3"]  # never the grading's "0"


# --------------------------------------------------------------------------- the record


def test_records_written_before_regrades_still_validate_and_new_ones_round_trip() -> None:
    old = make_record("t1", passed=True)
    old["result"].pop("regrades", None)
    assert AttemptRecord.model_validate(old).result.regrades == []
    new = make_record("t1", passed=False, reason="VERIFIER_FLAKY")
    new["result"]["regrades"] = [run(1, False).model_dump()]
    parsed = AttemptRecord.model_validate(new)
    assert parsed.result.regrades == [run(1, False)]
    assert AttemptRecord.model_validate(parsed.to_json_dict()) == parsed


# --------------------------------------------------------------------------- the option


def settings(tmp_path: Path, options: dict[str, Any] | None = None,
             ini: dict[str, Any] | None = None) -> Any:
    options = {"out": str(tmp_path / "runs"), **(options or {})}
    return build_settings(options.get, (ini or {}).get, suites=["s"], rootpath=tmp_path)


def test_regrade_comes_from_the_option_then_the_ini_and_defaults_to_0(tmp_path: Path) -> None:
    assert settings(tmp_path).regrade == 0
    assert settings(tmp_path, {"regrade": 3}).regrade == 3
    assert settings(tmp_path, ini={"regrade": "2"}).regrade == 2
    assert settings(tmp_path, {"regrade": 0}, ini={"regrade": "2"}).regrade == 0


@pytest.mark.parametrize("kwargs, where", [
    ({"options": {"regrade": -1}}, "--agentbench-regrade"),
    ({"ini": {"regrade": "many"}}, "agentbench_regrade (ini)"),
    ({"ini": {"regrade": "1.5"}}, "agentbench_regrade (ini)"),
])
def test_a_bad_regrade_count_is_one_line_naming_where(
    tmp_path: Path, kwargs: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValueError) as info:
        settings(tmp_path, **kwargs)
    message = str(info.value)
    assert message.startswith(f"{where}: expected a whole number of regrades (0 or more)")
    assert "\n" not in message


def test_the_run_config_names_regrade_only_when_asked(tmp_path: Path) -> None:
    plain, asked = settings(tmp_path), settings(tmp_path, {"regrade": 3})
    assert "regrade" not in run_config(plain, "img")  # old runs' config hash unchanged
    assert run_config(asked, "img")["regrade"] == 3
    assert config_hash(run_config(plain, "img")) != config_hash(run_config(asked, "img"))
