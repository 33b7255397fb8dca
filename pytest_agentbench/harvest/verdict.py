"""FAIL_TO_PASS and PASS_TO_PASS from per-test outcomes, never from log text.

Before the fix (the test part applied) the tests ran PRE_RUNS times, after it POST_RUNS times.
A test is FAIL_TO_PASS when it failed (or errored) in every run before and passed in every run
after; PASS_TO_PASS when it passed in all of them. A test whose outcome differs between runs of
the same state is flaky and dropped from both lists (the candidate stays if anything is left).
A test that no run before reported, because its module could not even be imported at the
parent, and that passes after is FAIL_TO_PASS too, of a *feature* task: the change added what
the test imports. A candidate with only such tests is labelled `feature`, else `bugfix`. At the
baseline pytest names such a test by its module alone (`ERROR tests/test_new.py`), never by its
id, so `baseline_failing` (the task's expected failing tests) leaves it out: the task's failing
and passing commands still run it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_agentbench.harvest.runs import Runs


@dataclass(frozen=True)
class CandidateVerdict:
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    flaky: tuple[str, ...]
    kind: str  # bugfix | feature
    reason: str | None  # why the candidate is dropped, or None
    baseline_failing: tuple[str, ...] = ()  # FAIL_TO_PASS the baseline names by id


def judge(runs: Runs) -> CandidateVerdict:
    if runs.reason is not None:
        return CandidateVerdict((), (), (), "bugfix", runs.reason)
    if not any(runs.post):
        return CandidateVerdict((), (), (), "bugfix", "TESTS_NOT_RUN")
    ids = sorted({node for run in runs.pre + runs.post for node in run if "::" in node})
    f2p, p2p, flaky, new = [], [], [], []
    for node in ids:
        before = {_failing(run.get(node, "absent")) for run in runs.pre}
        after = {_failing(run.get(node, "absent")) for run in runs.post}
        if len(before) > 1 or len(after) > 1:
            flaky.append(node)
        elif after == {"passed"} and before == {"failed"}:
            f2p.append(node)
        elif after == {"passed"} and before == {"absent"} and _uncollected(runs, node):
            f2p.append(node)
            new.append(node)
        elif after == {"passed"} and before == {"passed"}:
            p2p.append(node)
    kind = "feature" if f2p and len(new) == len(f2p) else "bugfix"
    reason = None if f2p else ("FLAKY_TESTS" if flaky else "NO_FAIL_TO_PASS")
    baseline = tuple(node for node in f2p if node not in new)
    return CandidateVerdict(tuple(f2p), tuple(p2p), tuple(flaky), kind, reason, baseline)


def _failing(outcome: str) -> str:
    """A failure and an error are one outcome: failing (a test that fails one run and errors
    the next is not flaky)."""
    return "failed" if outcome == "error" else outcome


def _uncollected(runs: Runs, node: str) -> bool:
    """Whether every run before reported the node's module as a collection error."""
    module = node.split("::", 1)[0]
    return all(run.get(module) == "error" for run in runs.pre) or all(
        not run for run in runs.pre) and all(code == 2 for code in runs.pre_exit)
