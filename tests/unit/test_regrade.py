"""--agentbench-regrade: the decision (core/regrade.py), what is regraded, the option's parsing
and where the setting is recorded. `regrade()` itself is driven here on a real attempt and the
local sandbox with a fake grading (`once`) whose verdict depends on the patch applied and the
hash seed; the real runs, in Docker sandboxes, are tested in tests/e2e/test_regrade_e2e.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.core.attempt import Attempt
from pytest_agentbench.core.gitops import APPLY_PATCH
from pytest_agentbench.core.regrade import (
    FLAKY_FIX,
    PASS_FAIL_MIX,
    decide,
    gradable,
    hash_seed,
    regrade,
    run_record,
    same_patch,
)
from pytest_agentbench.run.settings import build_settings
from pytest_agentbench.run.state import config_hash, run_config
from pytest_agentbench.run.verdict import Tally, category
from pytest_agentbench.sandbox.local import LocalSandboxFactory
from pytest_agentbench.sandbox.port import ExecResult, Sandbox, SandboxExited
from pytest_agentbench.schemas.records import AttemptRecord, RegradeRun, Result
from pytest_agentbench.schemas.taxonomy import Reason, blame
from pytest_agentbench.tasks.loader import load_task
from tests.support.attempts import attempt_config
from tests.support.plugin_runs import TASKPACKS
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
    assert message.startswith(f"{where}: expected a whole number of regrades (0 to 100)")
    assert "\n" not in message


def test_the_run_config_names_regrade_only_when_asked(tmp_path: Path) -> None:
    plain, asked = settings(tmp_path), settings(tmp_path, {"regrade": 3})
    assert "regrade" not in run_config(plain, "img")  # old runs' config hash unchanged
    assert run_config(asked, "img")["regrade"] == 3
    assert config_hash(run_config(plain, "img")) != config_hash(run_config(asked, "img"))


# --------------------------------------------------------------------------- regrade() itself

AGENT_PATCH = "diff --git a/minilib/tags.py b/minilib/tags.py\n--- a/minilib/tags.py\n+agent\n"


def attempt(tmp_path: Path, regrades: int, oracle: bool = True) -> Attempt:
    """A real attempt at stable-verifier (a copy without its oracle.patch when `oracle` is
    False) on the local sandbox, with a base for the regrades to copy."""
    import shutil

    task_dir = TASKPACKS / "custom-verifier" / "stable-verifier"
    if not oracle:
        packs = tmp_path / "taskpacks"
        shutil.copytree(TASKPACKS / "custom-verifier", packs / "custom-verifier")
        shutil.copytree(TASKPACKS / "_shared", packs / "_shared")
        task_dir = packs / "custom-verifier" / "stable-verifier"
        (task_dir / "oracle.patch").unlink()
    run_dir = tmp_path / "run"
    cfg = attempt_config(tmp_path, "r", run_dir=run_dir, regrade=regrades)
    at = Attempt(load_task(task_dir / "task.yaml"), cfg, LocalSandboxFactory())
    (at.workspace / "base" / ".git").mkdir(parents=True)
    return at


def copies_left(at: Attempt) -> list[str]:
    return [p.name for p in at.workspace.iterdir() if p.name not in ("base", "env")]


def reference_text() -> str:
    return (TASKPACKS / "custom-verifier" / "stable-verifier" / "oracle.patch").read_text()


class Grader:
    """A fake `once`: the verdict of the state it is given (which patch the fresh copy holds,
    under which PYTHONHASHSEED) from `passes(state, seed)`, state "agent" | "reference" |
    "none"; `explode` = (state, seed) raises SandboxExited there, as an OOM would."""

    def __init__(self, passes: Any, explode: tuple[str, str] | None = None) -> None:
        self.passes, self.explode = passes, explode
        self.calls: list[tuple[str, str, str]] = []

    def __call__(self, fresh: Sandbox, log: str, patched: bool) -> tuple[ExecResult, Result]:
        spec = fresh.spec  # type: ignore[attr-defined]
        seed = spec.env["PYTHONHASHSEED"]
        applied = spec.workspace / APPLY_PATCH
        text = applied.read_text() if patched else ""
        state = "none" if not text else "reference" if text == reference_text() else "agent"
        assert spec.workspace.name == log
        assert state == "reference" or not log.startswith("reference-")
        self.calls.append((log, state, seed))
        if self.explode == (state, seed):
            raise SandboxExited("container exited", exit_code=137, oom_killed=True)
        passed = self.passes(state, seed)
        return command(exit_code=0 if passed else 1), PASSED if passed else FAILED


def agent_flaky(state: str, seed: str) -> bool:
    """The agent's state passes under seeds 0 and 2 only; the reference under every seed."""
    return state == "reference" or seed in ("0", "2")


def test_a_flaky_agent_state_with_a_stable_reference_is_the_agents_flaky_fix(
    tmp_path: Path
) -> None:
    at = attempt(tmp_path, 3)
    grader = Grader(agent_flaky)
    result = regrade(at, at.workspace / "base", AGENT_PATCH, PASSED, grader)
    assert (result.passed, result.failure_reason, result.sub_reason) == (
        False, Reason.TESTS_FAILED, FLAKY_FIX)
    assert blame(result.failure_reason) == "agent"  # counted against the agent
    assert [(r.hash_seed, r.passed) for r in result.regrades] == [
        ("1", False), ("2", True), ("3", False)]
    assert result.signature == FAILING
    assert result.summary == (
        "the agent's final state passes only under some hash seeds (passed with "
        "PYTHONHASHSEED=0 (the grading), 2; failed with 1, 3) while the reference solution "
        "passes under every one (PYTHONHASHSEED=0, 1, 2, 3): the nondeterminism is in the "
        "agent's change, not in the verifier")
    assert grader.calls[3:] == [(f"reference-{i}", "reference", str(i)) for i in range(4)]
    reference = at.environment["regrade"]["reference"]
    assert reference["graded"] and reference["stable_pass"] and reference["problem"] is None
    assert [(r["hash_seed"], r["passed"]) for r in reference["runs"]] == [
        ("0", True), ("1", True), ("2", True), ("3", True)]
    assert copies_left(at) == []


def test_a_reference_that_is_flaky_too_leaves_the_verifier_flaky(tmp_path: Path) -> None:
    at = attempt(tmp_path, 3)
    grader = Grader(lambda state, seed: seed in ("0", "2"))
    result = regrade(at, at.workspace / "base", AGENT_PATCH, PASSED, grader)
    assert (result.failure_reason, result.sub_reason) == (Reason.VERIFIER_FLAKY, PASS_FAIL_MIX)
    assert result.summary.endswith(
        "the reference solution fails too (PYTHONHASHSEED=1), so the verifier is not shown "
        "stable")
    reference = at.environment["regrade"]["reference"]
    assert [r["passed"] for r in reference["runs"]] == [True, False]  # stopped: known then
    assert not reference["stable_pass"]


@pytest.mark.parametrize("oracle, patch, why", [
    (False, AGENT_PATCH, "no reference solution (oracle.patch) to compare with"),
    (True, None, "the agent's patch is the reference solution"),
])
def test_without_a_reference_to_grade_a_disagreement_stays_verifier_flaky(
    tmp_path: Path, oracle: bool, patch: str | None, why: str
) -> None:
    at = attempt(tmp_path, 2, oracle=oracle)
    grader = Grader(agent_flaky if patch else lambda state, seed: seed == "0")
    applied = patch if patch is not None else reference_text()
    result = regrade(at, at.workspace / "base", applied, PASSED, grader)
    assert (result.failure_reason, result.sub_reason) == (Reason.VERIFIER_FLAKY, PASS_FAIL_MIX)
    assert result.summary.endswith(f"; {why}")
    assert at.environment["regrade"]["reference"] == {"graded": False, "why": why}
    assert [log for log, _, _ in grader.calls] == ["regrade-1", "regrade-2"]  # no reference run


def test_regrades_that_agree_grade_no_reference(tmp_path: Path) -> None:
    at = attempt(tmp_path, 2)
    grader = Grader(lambda state, seed: True)
    result = regrade(at, at.workspace / "base", AGENT_PATCH, PASSED, grader)
    assert result.passed and len(result.regrades) == 2
    assert "reference" not in at.environment["regrade"]
    assert len(grader.calls) == 2


def test_a_sandbox_error_in_a_regrade_keeps_the_grading_and_is_recorded(tmp_path: Path) -> None:
    at = attempt(tmp_path, 3)
    grader = Grader(lambda state, seed: True, explode=("agent", "2"))
    result = regrade(at, at.workspace / "base", AGENT_PATCH, PASSED, grader)
    assert result.passed and result.failure_reason is None  # the grading stands
    assert [r.hash_seed for r in result.regrades] == ["1"]  # the runs completed
    report = at.environment["regrade"]
    assert report["seeds"] == ["1"]
    assert report["problem"] == (
        "regrade 2: sandbox failed (SandboxExited): container exited")
    assert [log for log, _, _ in grader.calls] == ["regrade-1", "regrade-2"]  # stopped there
    assert copies_left(at) == []


def test_a_sandbox_error_after_a_disagreement_decides_on_the_runs_completed(
    tmp_path: Path
) -> None:
    at = attempt(tmp_path, 3)
    grader = Grader(agent_flaky, explode=("agent", "2"))
    result = regrade(at, at.workspace / "base", AGENT_PATCH, PASSED, grader)
    assert [(r.hash_seed, r.passed) for r in result.regrades] == [("1", False)]
    assert (result.failure_reason, result.sub_reason) == (Reason.TESTS_FAILED, FLAKY_FIX)
    assert at.environment["regrade"]["problem"].startswith("regrade 2: sandbox failed")


def test_a_sandbox_error_in_a_reference_run_leaves_the_verifier_flaky(tmp_path: Path) -> None:
    at = attempt(tmp_path, 2)
    grader = Grader(agent_flaky, explode=("reference", "1"))
    result = regrade(at, at.workspace / "base", AGENT_PATCH, PASSED, grader)
    assert result.failure_reason == Reason.VERIFIER_FLAKY
    problem = "reference run 1: sandbox failed (SandboxExited): container exited"
    assert at.environment["regrade"]["reference"]["problem"] == problem
    assert result.summary.endswith(f"the reference solution could not be graded ({problem})")


def test_the_same_patch_ignores_index_lines_and_trailing_blank_space() -> None:
    ours = "diff --git a/x b/x\nindex 1234567..89abcde 100644\n--- a/x\n+++ b/x\n@@\n-a\n+b\n"
    theirs = ours.replace("1234567..89abcde", "123456789..89abcdef0") + "\n"
    assert same_patch(ours, theirs)
    assert not same_patch(ours, ours.replace("+b", "+c"))
