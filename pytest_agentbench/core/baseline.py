"""Baseline validation: the failing command must fail, the same way, for the expected reason."""

from __future__ import annotations

import difflib
import re

from pytest_agentbench.core.evidence import JunitResults
from pytest_agentbench.sandbox.port import ExecResult
from pytest_agentbench.schemas.records import BaselineRun, BaselineValidation
from pytest_agentbench.schemas.task import ValidationSpec
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.text.signatures import sha256, signature


class BaselineVerdict:
    """A task-level verdict: reason, sub-reason and one line for people. None reason = valid."""

    def __init__(
        self, reason: Reason | None = None, sub_reason: str | None = None, summary: str = ""
    ) -> None:
        self.reason, self.sub_reason, self.summary = reason, sub_reason, summary


def to_run(result: ExecResult) -> BaselineRun:
    return BaselineRun(
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_sec=result.duration_ms / 1000,
        stdout_sha256=sha256(result.stdout),
        stderr_sha256=sha256(result.stderr),
        signature=signature(result.exit_code, result.stdout, result.stderr),
    )


def evaluate(
    validation: ValidationSpec, results: list[ExecResult], evidence: JunitResults | None = None
) -> tuple[BaselineValidation, BaselineVerdict]:
    """The baseline record and verdict; `evidence` (the first run's junit results, if any) tells
    an expected failing test that did not run from one that ran and passed."""
    runs = [to_run(r) for r in results]
    record = BaselineValidation(
        attempted=True,
        exit_code=runs[0].exit_code,
        runs=runs,
        flake_check_runs=len(runs),
        signature=runs[0].signature,
    )
    verdict = _judge(validation, results, runs, evidence)
    record.failed_as_expected = verdict.reason is None
    if verdict.reason is Reason.BASELINE_FLAKY:
        record.is_flaky = True
        modes = {tuple(r.signature) for r in runs}
        record.flake_failure_modes = [list(m) for m in sorted(modes)]
    return record, verdict


def _judge(
    validation: ValidationSpec, results: list[ExecResult], runs: list[BaselineRun],
    evidence: JunitResults | None = None,
) -> BaselineVerdict:
    cmd = validation.failing_command
    if any(r.timed_out for r in results):
        return BaselineVerdict(Reason.SETUP_FAILED, "BASELINE_TIMEOUT",
                               f"failing_command timed out: {cmd}")
    passed = [r.exit_code == 0 for r in results]
    if all(passed):
        return BaselineVerdict(
            Reason.BASELINE_NOT_FAILING,
            None,
            f"failing_command passes before any change ({len(runs)} runs): {cmd}",
        )
    if any(passed):
        codes = ", ".join(str(r.exit_code) for r in runs)
        return BaselineVerdict(
            Reason.BASELINE_FLAKY,
            "PASS_FAIL_MIX",
            f"failing_command passed in some runs and failed in others (exit {codes})",
        )
    if len({tuple(r.signature) for r in runs}) > 1:
        return BaselineVerdict(
            Reason.BASELINE_FLAKY,
            "SIGNATURE_CHANGED",
            f"failing_command failed differently across {len(runs)} runs: "
            + " | ".join(",".join(r.signature) for r in runs),
        )
    first = results[0]
    text = first.stdout + "\n" + first.stderr
    if validation.expected_exit_codes and first.exit_code not in validation.expected_exit_codes:
        return BaselineVerdict(
            Reason.SETUP_FAILED,
            "UNEXPECTED_EXIT_CODE",
            f"failing_command exited {first.exit_code}, expected one of "
            f"{validation.expected_exit_codes}",
        )
    if validation.expected_failure_regex and not re.search(validation.expected_failure_regex, text):
        return BaselineVerdict(
            Reason.SETUP_FAILED,
            "EXPECTED_FAILURE_NOT_SEEN",
            f"failing_command output does not match expected_failure_regex "
            f"{validation.expected_failure_regex!r}",
        )
    if validation.disallowed_failure_regex:
        match = re.search(validation.disallowed_failure_regex, text)
        if match:
            return BaselineVerdict(
                Reason.SETUP_FAILED,
                "DISALLOWED_FAILURE",
                f"failing_command fails for a disallowed reason: {match.group(0)!r}",
            )
    if validation.expected_failing_tests:
        failing = sorted(node.split(" ", 1)[1] for node in runs[0].signature
                         if node.startswith(("FAILED ", "ERROR ")))
        missing = [t for t in validation.expected_failing_tests if t not in failing]
        if missing:
            return BaselineVerdict(Reason.SETUP_FAILED, "EXPECTED_TESTS_NOT_FAILING",
                           _not_failing(missing, failing, evidence))
    return BaselineVerdict()


def _not_failing(missing: list[str], failing: list[str], evidence: JunitResults | None) -> str:
    """Which expected failing tests were not collected (a typo, a moved test) and which ran and
    did not fail, with the tests that did fail: what to write instead."""
    absent = [t for t in missing if evidence is not None and evidence.outcome_of(t) is None]
    ran = [t for t in missing if t not in absent]
    parts = []
    if absent:
        hints = [f"{t} (did you mean {close[0]}?)" if (close := difflib.get_close_matches(
            t, failing, n=1, cutoff=0.7)) else t for t in absent]
        parts.append(f"expected failing tests not collected: {', '.join(hints)}")
    if ran:
        how = "" if evidence is None else " (they ran and " + ", ".join(
            sorted({str(evidence.outcome_of(t)) for t in ran})) + ")"
        parts.append(f"expected failing tests did not fail{how}: {', '.join(ran)}")
    shown = ", ".join(failing[:10]) + (f" and {len(failing) - 10} more" if len(failing) > 10
                                       else "")
    parts.append(f"the tests that failed: {shown}" if failing else "no test failed by name")
    return "; ".join(parts)
