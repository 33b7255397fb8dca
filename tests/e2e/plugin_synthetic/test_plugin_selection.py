"""The pytest plugin on synthetic taskpacks (tests/support/tiny_pack.py): selection and order,
xdist workers (a crashed one too), attempts and quarantine. Each test is a whole plugin run."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from pytest_agentbench.run.hostenv import work_root
from tests.support.run_dirs import run_dirs as dirs_under
from tests.support.tiny_pack import (
    SUITE,
    Pack,
    attempts,
    by_task,
    only_run_dir,
    output,
    run_suite,
)

# --------------------------------------------------------------------------- selection


def test_k_selects_by_task_id_and_by_label(pytester: pytest.Pytester, standard: Pack) -> None:
    by_id = run_suite(pytester, "-k", "good-a")
    by_id.assert_outcomes(passed=1, deselected=3)
    assert [r["task_id"] for r in attempts(only_run_dir(pytester))] == ["good-a"]

    by_label = run_suite(pytester, "--collect-only", "-q", "-k", "beta-label or flaky")
    assert by_label.ret == 0
    collected = [line for line in by_label.stdout.lines if "::" in line]
    assert [line.rsplit("::", 1)[1] for line in collected] == ["flip-flop", "good-b"]
    suite_kw = run_suite(pytester, "--collect-only", "-q", "-k", SUITE)
    assert len([line for line in suite_kw.stdout.lines if "::" in line]) == 4


def test_collection_order_is_sorted_and_stable(pytester: pytest.Pytester, standard: Pack) -> None:
    first = run_suite(pytester, "--collect-only", "-q")
    second = run_suite(pytester, "--collect-only", "-q")
    ids = [line for line in first.stdout.lines if "::" in line]
    assert ids == [line for line in second.stdout.lines if "::" in line]
    assert [i.rsplit("::", 1)[1] for i in ids] == sorted(
        ["already-passes", "flip-flop", "good-a", "good-b"]
    )


def test_xdist_records_match_a_serial_run(pytester: pytest.Pytester, standard: Pack) -> None:
    run_suite(pytester, "--agentbench-out=serial").assert_outcomes(passed=2, errors=1, xfailed=1)
    run_suite(pytester, "--agentbench-out=parallel", "-n", "2").assert_outcomes(
        passed=2, errors=1, xfailed=1
    )
    (serial,) = dirs_under(pytester.path / "serial")
    (parallel,) = dirs_under(pytester.path / "parallel")

    def key(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted(
            (r["task_id"], r["attempt_index"], r["pytest_outcome"], r["result"]["failure_reason"])
            for r in records
        )

    serial_records, parallel_records = attempts(serial), attempts(parallel)
    assert len(serial_records) == len(parallel_records) == 4
    assert key(serial_records) == key(parallel_records)
    assert {r["worker"] for r in serial_records} == {"master"}
    assert {r["worker"] for r in parallel_records} <= {"gw0", "gw1"}


def test_no_more_workers_start_than_the_run_has_items(
    pytester: pytest.Pytester, pack: Pack
) -> None:
    """`-n 2` with one task started two workers, one of which only collected (issue 22)."""
    pack.task("good-a")
    result = run_suite(pytester, "-n", "2")
    result.assert_outcomes(passed=1)
    text = output(result)
    assert "agentbench: 1 xdist worker(s): the run has 1 item(s)" in text
    assert "created: 1/1 worker" in text, text
    assert [r["worker"] for r in attempts(only_run_dir(pytester))] == ["gw0"]


def test_a_crashed_worker_still_yields_a_record(pytester: pytest.Pytester, pack: Pack) -> None:
    pack.task("good-a")
    pack.task("crashy", failing="kill -9 $PPID; sleep 5")  # kills the xdist worker running it
    result = run_suite(pytester, "-n", "2")
    run_dir = only_run_dir(pytester)
    # the killed worker could not remove its checkout
    shutil.rmtree(work_root(run_dir.name), True)
    result.assert_outcomes(passed=1, failed=1)
    records = by_task(attempts(run_dir))
    assert set(records) == {"good-a", "crashy"}
    crash = records["crashy"]["result"]
    assert (crash["failure_reason"], crash["sub_reason"]) == ("SANDBOX_ERROR", "WORKER_CRASH")
    assert records["crashy"]["pytest_outcome"] == "error"
    assert records["good-a"]["pytest_outcome"] == "passed"


def test_a_crashed_worker_s_record_names_the_attempt_it_ran(
    pytester: pytest.Pytester, pack: Pack
) -> None:
    """The controller knows each collected item's attempt by its node id (not by its name)."""
    pack.task("crashy", failing="kill -9 $PPID; sleep 5")
    run_suite(pytester, "-n", "2", "--agentbench-attempts", "2")
    run_dir = only_run_dir(pytester)
    shutil.rmtree(work_root(run_dir.name), True)
    records = attempts(run_dir)
    assert sorted(r["attempt_index"] for r in records) == [0, 1]
    assert {r["result"]["sub_reason"] for r in records} == {"WORKER_CRASH"}


# --------------------------------------------------------------------------- attempts


def test_attempts_make_one_item_per_attempt(pytester: pytest.Pytester, standard: Pack) -> None:
    result = run_suite(pytester, "--agentbench-attempts", "2", "-k", "good-a", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*::good-a?oracle-attempt1? PASSED*", "*::good-a?oracle-attempt2? PASSED*"]
    )
    run_dir = only_run_dir(pytester)
    records = attempts(run_dir)
    assert sorted(r["attempt_index"] for r in records) == [0, 1]
    assert len({r["attempt_id"] for r in records}) == 2
    for record in records:
        label = f"attempt-{record['attempt_index'] + 1}"
        assert record["artifact_paths"]["task_dir"] == f"tasks/good-a/{label}"
        task_dir = run_dir / "tasks" / "good-a" / label
        assert (task_dir / "task.yaml").read_text() == (
            standard.root / SUITE / "good-a" / "task.yaml"
        ).read_text()
        assert "+good" in (task_dir / "diffs" / "final.patch").read_text()


@pytest.mark.parametrize(
    "count",
    ["-1", "0"],
)
def test_attempts_must_be_positive(pytester: pytest.Pytester, standard: Pack, count: str) -> None:
    result = run_suite(pytester, "--agentbench-attempts", count)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--agentbench-attempts: expected a positive integer" in result.stderr.str()


# --------------------------------------------------------------------------- quarantine


def test_quarantine_skip(pytester: pytest.Pytester, standard: Pack) -> None:
    standard.task("explicit", quarantine="waiting on upstream")
    result = run_suite(pytester, "--agentbench-quarantine", "skip", "-rs")
    result.assert_outcomes(passed=2, errors=1, skipped=2)
    result.stdout.fnmatch_lines(["SKIPPED*explicit*quarantined: waiting on upstream"])
    result.stdout.fnmatch_lines(["SKIPPED*flip-flop*quarantined: labelled flaky"])
    records = by_task(attempts(only_run_dir(pytester)))
    assert set(records) == {"good-a", "good-b", "already-passes"}  # skipped tasks never ran


def test_quarantine_only(pytester: pytest.Pytester, standard: Pack) -> None:
    standard.task("explicit", quarantine="waiting on upstream")
    result = run_suite(pytester, "--agentbench-quarantine", "only")
    # Only the quarantined tasks run, with their real outcome (no xfail cover).
    result.assert_outcomes(passed=1, errors=1, deselected=3)
    records = by_task(attempts(only_run_dir(pytester)))
    assert {k: (v["quarantined"], v["pytest_outcome"]) for k, v in records.items()} == {
        "flip-flop": ("labelled flaky", "error"),
        "explicit": ("waiting on upstream", "passed"),
    }


def test_quarantine_run_is_non_strict_xfail(pytester: pytest.Pytester, standard: Pack) -> None:
    standard.task("explicit", quarantine="waiting on upstream")
    result = run_suite(pytester, "-k", "explicit or flip")
    result.assert_outcomes(xfailed=1, xpassed=1)  # non-strict: a passing quarantined task XPASS
    assert result.ret == 0


def test_quarantine_from_ini(pytester: pytest.Pytester, standard: Pack) -> None:
    pytester.makeini("[pytest]\nagentbench_quarantine = skip\n")
    result = run_suite(pytester, "-k", "flip")
    result.assert_outcomes(skipped=1, deselected=3)


