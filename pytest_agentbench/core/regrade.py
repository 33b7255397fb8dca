"""Regrading, `--agentbench-regrade N`: does the verifier agree with itself on the final state?

After the normal grading, the passing command runs N more times on the same final state. Each
regrade gets a fresh copy of the workspace scoring started from (the pre-agent copy), a fresh
sandbox, the agent's diff applied as scoring applied it, and the passing command with the same
timeout and the same results check (core/scoring.py). Each run is recorded in
`result.regrades`: exit code, duration, failing-test signature (text/signatures.py).

Regrade i runs under PYTHONHASHSEED=i, while the grading (like every other command) keeps the
harness's deterministic "0" (sandbox/capture.py DETERMINISTIC_ENV). Re-running under another
hash seed is what shows the most common flaky verifier in practice: a test that depends on the
iteration order of a set or dict of strings passes under one seed and fails under another. It
also makes a regrade reproducible: the same seeds give the same verdicts on every run.

If they all agree, the result is what the grading said, with the regrade runs added. N = 0 (the
default) runs nothing and changes nothing. If any regrade's pass/fail differs from the
grading's, whose the nondeterminism is decides the verdict. The agent's own code can be it (a
fix that depends on hash order or randomness), so when the task has a reference solution (its
oracle patch) and the agent's patch is not that patch, the reference state is graded the same
way: a fresh copy of the same base with the oracle patch applied instead, under seed 0 and the
same seeds 1..N. When the reference passes under every seed, the verifier is stable and the
flakiness is the agent's: TESTS_FAILED/FLAKY_FIX, against the agent. Otherwise (the reference
disagrees with itself or fails, or cannot be graded, or there is none, or the agent's patch is
the reference) the attempt ends VERIFIER_FLAKY (sub_reason PASS_FAIL_MIX): a task problem,
counted as flaky with the task's problems, never against the agent (schemas/taxonomy.py
FLAKY_REASONS). The reference runs are recorded in environment.json's "regrade" report.

A regrade whose sandbox fails (SandboxError: the engine lost, the sandbox exited out of memory or
out of lifetime) neither replaces the grading's verdict nor blames the agent: the problem is
recorded in the report, regrading stops, and the runs completed decide (the grading stands when
none disagreed). The same holds for a reference run: the reference is then not compared with.

Only an attempt whose passing command decided its verdict is regraded: not one that never got
that far (an invalid task, an infrastructure error, a diff that does not apply), not an edit
outside the task's rules (the tests do not decide that verdict), and not a grading that timed
out or filled the disk (N more runs would cost N times the timeout or the disk and say nothing
about the tests' own pass/fail).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest_agentbench.core.hidden_tests as hidden_tests
from pytest_agentbench.core.attempt import Attempt, Failure
from pytest_agentbench.core.attempt_config import sandbox_spec
from pytest_agentbench.core.gitops import APPLY_PATCH
from pytest_agentbench.paths.trees import copy_tree, remove_tree
from pytest_agentbench.sandbox.port import ExecResult, Sandbox, SandboxError
from pytest_agentbench.schemas.records import RegradeRun, Result
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.tasks.taskpack_files import (
    MAX_TASK_ASSET_BYTES,
    UnsafeFileError,
    open_task_file,
)

PASS_FAIL_MIX = "PASS_FAIL_MIX"
# TESTS_FAILED's: the agent's final state disagrees with itself where the reference does not.
# A harness sub-reason like PASS_FAIL_MIX and EDIT_NOT_ALLOWED, declared where it is decided
# (schemas/taxonomy.py AGENT_SUB_REASONS lists the built-in agents' own).
FLAKY_FIX = "FLAKY_FIX"
GRADING_SEED = "0"  # DETERMINISTIC_ENV's, which the grading runs under
BASE_NAME = "regrade-base"
REFERENCE = "reference"  # the reference runs' workspace and log names: reference-0..N

#: Applies the diff written to the fresh copy (when the bool says one was) in a fresh sandbox
#: and runs the passing command there, as scoring does: (the command's result, its verdict).
#: `log` names its log files.
GradeOnce = Callable[[Sandbox, str, bool], tuple[ExecResult, Result]]


def hash_seed(index: int) -> str:
    """PYTHONHASHSEED of regrade `index` (1..N): never the grading's "0"; the reference's
    run 0 is under the grading's own."""
    return str(index)


def gradable(command: ExecResult, violation: str | None) -> bool:
    """Whether the passing command's own pass/fail decided the grading (see the module doc)."""
    return violation is None and not command.timed_out and not command.disk_limit_exceeded


def run_record(
    index: int, command: ExecResult, verdict: Result, wall_sec: float
) -> RegradeRun:
    return RegradeRun(**run_fields(index, command, verdict, wall_sec))


def run_fields(
    index: int, command: ExecResult, verdict: Result, wall_sec: float
) -> dict[str, Any]:
    """A run's record as RegradeRun's fields; a reference run (environment.json) may be run 0,
    which RegradeRun (regrades 1..N) does not allow."""
    return dict(
        index=index,
        hash_seed=hash_seed(index),
        passed=verdict.passed,
        exit_code=command.exit_code,
        timed_out=command.timed_out,
        # the tests' own sub-reason (results contradicting exit 0, the disk limit), never the
        # agent's, which the grading's verdict falls back on for a failure
        sub_reason=verdict.sub_reason if verdict.failure_reason == Reason.TESTS_FAILED else None,
        signature=[] if verdict.passed else list(verdict.signature),
        duration_sec=round(command.duration_ms / 1000, 3),
        wall_sec=round(wall_sec, 3),
    )


def disagrees(graded: Result, runs: list[RegradeRun]) -> bool:
    return any(run.passed != graded.passed for run in runs)


def _seed_lists(graded: Result, runs: list[RegradeRun]) -> str:
    seeds: dict[bool, list[str]] = {True: [], False: []}
    seeds[graded.passed].append(f"{GRADING_SEED} (the grading)")
    for run in runs:
        seeds[run.passed].append(run.hash_seed)
    return (
        f"passed with PYTHONHASHSEED={', '.join(seeds[True])}; "
        f"failed with {', '.join(seeds[False])}"
    )


def decide(
    graded: Result, runs: list[RegradeRun], reference: list[dict[str, Any]] | None = None,
    note: str = "",
) -> Result:
    """The attempt's result: the grading's with the runs added when every run agrees with it
    on pass/fail. Else TESTS_FAILED/FLAKY_FIX when `reference` (the reference state's runs, seed
    0 first) passed under every seed, else VERIFIER_FLAKY (PASS_FAIL_MIX); either keeps the
    grading's counts and a failing run's signature. `note` ends a VERIFIER_FLAKY summary (why
    the reference could not tell)."""
    if not disagrees(graded, runs):
        return graded.model_copy(update={"regrades": list(runs)})
    signature = graded.signature if not graded.passed else next(
        run.signature for run in runs if not run.passed
    )
    mix = _seed_lists(graded, runs)
    if reference and all(run["passed"] for run in reference):
        reason, sub = Reason.TESTS_FAILED, FLAKY_FIX
        seeds = ", ".join(run["hash_seed"] for run in reference)
        summary = (
            f"the agent's final state passes only under some hash seeds ({mix}) while the "
            f"reference solution passes under every one (PYTHONHASHSEED={seeds}): the "
            "nondeterminism is in the agent's change, not in the verifier"
        )
    else:
        reason, sub = Reason.VERIFIER_FLAKY, PASS_FAIL_MIX
        summary = f"passing_command disagrees with itself on the final state: {mix}"
        if note:
            summary += f"; {note}"
    return Result(
        passed=False,
        exit_code=graded.exit_code,
        failure_reason=reason,
        sub_reason=sub,
        summary=summary,
        signature=list(signature),
        tests_passed=graded.tests_passed,
        tests_failed=graded.tests_failed,
        regrades=list(runs),
    )


def keep_base(at: Attempt) -> Path:
    """What every regrade starts from: the state scoring starts from, taken before scoring's
    sandbox changes it. The env-cache entry's repository when the pre-agent copy is a view of
    it, else a copy of that copy made now (call before scoring opens its sandbox; `drop_base`
    after, on every path)."""
    if at.cache_hold is not None:
        return at.cache_hold.repo
    base = at.workspace / BASE_NAME
    copy_tree(at.workspace / "pristine", base)
    return base


def drop_base(base: Path) -> None:
    """Remove the copy `keep_base` made (never an env-cache entry's repository)."""
    if base.name == BASE_NAME:
        remove_tree(base)


def reference_patch(at: Attempt) -> tuple[str | None, str]:
    """The task's reference solution (its oracle patch, read as the oracle agent reads it), or
    None and why there is none to compare with."""
    name = at.spec.oracle.patch
    try:
        text = open_task_file(at.task.task_dir, name, MAX_TASK_ASSET_BYTES).decode("utf-8")
    except FileNotFoundError:
        return None, f"no reference solution ({name}) to compare with"
    except (UnsafeFileError, OSError, UnicodeDecodeError) as exc:
        return None, f"the reference solution ({name}) could not be read: {exc}"
    if not text.strip():
        return None, f"the reference solution ({name}) is empty"
    return text, ""


def same_patch(agent: str, reference: str) -> bool:
    """The agent's diff is the reference's: the same text but for `index` lines (blob ids,
    abbreviated to another length by another git) and trailing blank space."""

    def norm(patch: str) -> list[str]:
        return [line.rstrip("\r") for line in patch.strip().splitlines()
                if not line.startswith("index ")]

    return norm(agent) == norm(reference)


#: One grading: (seed index, the patch to apply, the workspace and log name) -> the command's
#: result, its verdict, the wall time it took.
Run = Callable[[int, str, str], tuple[ExecResult, Result, float]]


def regrade(at: Attempt, base: Path, patch: str, graded: Result, once: GradeOnce) -> Result:
    """Run the `at.cfg.shared.regrade` regrades, one after the other, then the reference's when they
    disagree with the grading, and decide (module doc). `base` stays: `drop_base` is the
    caller's."""

    def run(index: int, applied: str, name: str) -> tuple[ExecResult, Result, float]:
        return _one(at, base, applied, index, once, name)

    return regrade_runs(at.cfg.shared.regrade, patch, graded, run, lambda: reference_patch(at),
                        at.environment)


def regrade_runs(
    requested: int, patch: str, graded: Result, run: Run,
    reference: Callable[[], tuple[str | None, str]], environment: dict[str, Any],
) -> Result:
    """`regrade` given how to run one grading (`run(seed index, patch, name)`) and where the
    reference solution comes from; the report goes to environment["regrade"]."""
    runs: list[RegradeRun] = []
    report: dict[str, Any] = {"requested": requested, "seeds": [], "problem": None}
    environment["regrade"] = report
    for index in range(1, requested + 1):
        try:
            runs.append(run_record(index, *run(index, patch, f"regrade-{index}")))
        except (Failure, SandboxError) as exc:
            # the diff that applied for the grading did not apply here, or the sandbox failed:
            # not the verifier's answer; the runs completed decide
            report["problem"] = f"regrade {index}: {_problem(exc)}"
            break
        report["seeds"] = [r.hash_seed for r in runs]
    if not disagrees(graded, runs):
        return decide(graded, runs)
    ref_runs, note = _reference(requested, patch, run, reference, report)
    return decide(graded, runs, ref_runs, note)


def _reference(
    requested: int, patch: str, run: Run,
    reference: Callable[[], tuple[str | None, str]], report: dict[str, Any],
) -> tuple[list[dict[str, Any]] | None, str]:
    """The reference state graded under seed 0 and 1..N, stopping at its first disagreement or
    failure (the verdict is then known); (its runs when all completed, a note for the summary
    otherwise). Recorded in report["reference"]."""
    text, why = reference()
    if text is None:
        report["reference"] = {"graded": False, "why": why}
        return None, why
    if same_patch(patch, text):
        why = "the agent's patch is the reference solution"
        report["reference"] = {"graded": False, "why": why}
        return None, why
    runs: list[dict[str, Any]] = []
    entry: dict[str, Any] = {"graded": True, "runs": runs, "problem": None}
    report["reference"] = entry
    note = ""
    for index in range(requested + 1):
        try:
            runs.append(run_fields(index, *run(index, text, f"{REFERENCE}-{index}")))
        except (Failure, SandboxError) as exc:
            entry["problem"] = f"reference run {index}: {_problem(exc)}"
            note = f"the reference solution could not be graded ({entry['problem']})"
            break
        if not runs[-1]["passed"]:
            note = (f"the reference solution fails too (PYTHONHASHSEED={runs[-1]['hash_seed']}), "
                    "so the verifier is not shown stable")
            break
    entry["stable_pass"] = not note
    return (None if note else runs), note


def _problem(exc: Failure | SandboxError) -> str:
    if isinstance(exc, Failure):
        return f"{exc.reason}: {exc.summary}"
    return f"sandbox failed ({type(exc).__name__}): {exc}"


def _one(
    at: Attempt, base: Path, patch: str, index: int, once: GradeOnce, name: str
) -> tuple[ExecResult, Result, float]:
    """One grading: a fresh copy, `patch` written where scoring puts it, a fresh sandbox under
    the seed of `index`, the passing command again."""
    start = time.monotonic()
    at.provision_from(name, base)
    try:
        return _graded(at, patch, index, once, name, start)
    finally:
        try:
            at.sandboxes.release(at.workspace / name)
        finally:
            remove_tree(at.workspace / name)


def _graded(
    at: Attempt, patch: str, index: int, once: GradeOnce, name: str, start: float
) -> tuple[ExecResult, Result, float]:
    # the copy may predate the agent's diff (an env-cache entry's repo) or hold another one
    target = at.workspace / name / APPLY_PATCH
    if patch:
        target.write_text(patch, "utf-8")
    elif target.exists():
        target.unlink()
    hidden = hidden_tests.load(at)
    if hidden is not None:  # applied over the diff, as scoring applies them
        hidden_tests.place(hidden, at, name)
    spec = at.spec
    sandbox = at.sandboxes.open(
        sandbox_spec(
            at.cfg, spec, at.workspace,
            network=spec.environment.network_policy == "always",
            phase="regrade", env_dir=at.env_dir, repo_dir=name,
            extra_env={"PYTHONHASHSEED": hash_seed(index)},
        )
    )
    at.open_sandboxes.append(sandbox)  # closed again at teardown, should this one raise
    at.environment.setdefault("sandboxes", []).append(
        {"phase": name, "network": sandbox.spec.network, "facts": sandbox.facts()}
    )
    try:
        command, verdict = once(sandbox, name, bool(patch))
    finally:
        sandbox.close()
    return command, verdict, time.monotonic() - start
