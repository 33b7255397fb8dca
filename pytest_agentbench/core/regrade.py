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

If any regrade's pass/fail differs from the grading's, the attempt ends VERIFIER_FLAKY
(sub_reason PASS_FAIL_MIX): a task problem, counted as flaky with the task's problems, never
against the agent (schemas/taxonomy.py FLAKY_REASONS). If they all agree, the result is what the
grading said, with the regrade runs added. N = 0 (the default) runs nothing and changes nothing.

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

from pytest_agentbench.core.attempt import Attempt, Failure
from pytest_agentbench.core.gitops import APPLY_PATCH
from pytest_agentbench.core.trial_config import sandbox_spec
from pytest_agentbench.paths.trees import copy_tree, remove_tree
from pytest_agentbench.sandbox.port import ExecResult, Sandbox
from pytest_agentbench.schemas.records import RegradeRun, Result
from pytest_agentbench.schemas.taxonomy import Reason

PASS_FAIL_MIX = "PASS_FAIL_MIX"
GRADING_SEED = "0"  # DETERMINISTIC_ENV's, which the grading runs under

#: Applies the agent's diff in a fresh sandbox and runs the passing command there, as scoring
#: does: (the command's result, its verdict). `log` names its log files.
GradeOnce = Callable[[Sandbox, str], tuple[ExecResult, Result]]


def hash_seed(index: int) -> str:
    """PYTHONHASHSEED of regrade `index` (1..N): never the grading's "0"."""
    return str(index)


def gradable(command: ExecResult, violation: str | None) -> bool:
    """Whether the passing command's own pass/fail decided the grading (see the module doc)."""
    return violation is None and not command.timed_out and not command.disk_limit_exceeded


def run_record(
    index: int, command: ExecResult, verdict: Result, wall_sec: float
) -> RegradeRun:
    return RegradeRun(
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


def decide(graded: Result, runs: list[RegradeRun]) -> Result:
    """The attempt's result: the grading's with the runs added when every run agrees with it
    on pass/fail, else VERIFIER_FLAKY (PASS_FAIL_MIX) keeping the grading's counts and a
    failing run's signature."""
    if all(run.passed == graded.passed for run in runs):
        return graded.model_copy(update={"regrades": list(runs)})
    seeds: dict[bool, list[str]] = {True: [], False: []}
    seeds[graded.passed].append(f"{GRADING_SEED} (the grading)")
    for run in runs:
        seeds[run.passed].append(run.hash_seed)
    signature = graded.signature if not graded.passed else next(
        run.signature for run in runs if not run.passed
    )
    summary = (
        "passing_command disagrees with itself on the final state: passed with "
        f"PYTHONHASHSEED={', '.join(seeds[True])}; failed with {', '.join(seeds[False])}"
    )
    return Result(
        passed=False,
        exit_code=graded.exit_code,
        failure_reason=Reason.VERIFIER_FLAKY,
        sub_reason=PASS_FAIL_MIX,
        summary=summary,
        signature=list(signature),
        tests_passed=graded.tests_passed,
        tests_failed=graded.tests_failed,
        regrades=list(runs),
    )


def keep_base(at: Attempt) -> Path:
    """What every regrade starts from: the state scoring starts from, taken before scoring's
    sandbox changes it. The env-cache entry's repository when the pre-agent copy is a view of
    it, else a copy of that copy made now (call before scoring opens its sandbox)."""
    if at.cache_hold is not None:
        return at.cache_hold.repo
    base = at.workspace / "regrade-base"
    copy_tree(at.workspace / "pristine", base)
    return base


def regrade(at: Attempt, base: Path, patch: str, graded: Result, once: GradeOnce) -> Result:
    """Run the `at.cfg.regrade` regrades, one after the other, and decide (module doc)."""
    runs: list[RegradeRun] = []
    report: dict[str, object] = {"requested": at.cfg.regrade, "seeds": [], "problem": None}
    at.environment["regrade"] = report
    for index in range(1, at.cfg.regrade + 1):
        try:
            runs.append(_one(at, base, patch, index, once))
        except Failure as failure:  # the diff that applied for the grading did not apply here
            report["problem"] = f"regrade {index}: {failure.reason}: {failure.summary}"
            break
        report["seeds"] = [run.hash_seed for run in runs]
    if base.name == "regrade-base":
        remove_tree(base)
    return decide(graded, runs)


def _one(at: Attempt, base: Path, patch: str, index: int, once: GradeOnce) -> RegradeRun:
    """One regrade: a fresh copy, a fresh sandbox under its hash seed, the grading again."""
    start = time.monotonic()
    name = f"regrade-{index}"
    at.provision_from(name, base)
    if patch:  # where scoring put it: the copy may predate it (an env-cache entry's repo)
        (at.workspace / name / APPLY_PATCH).write_text(patch, "utf-8")
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
        command, verdict = once(sandbox, name)
    finally:
        sandbox.close()
        at.sandboxes.release(at.workspace / name)
        remove_tree(at.workspace / name)
    return run_record(index, command, verdict, time.monotonic() - start)
