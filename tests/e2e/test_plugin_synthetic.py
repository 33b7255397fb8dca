"""The pytest plugin on synthetic taskpacks: collection, outcome mapping, options, records.

Every test builds a tiny suite in pytester's directory (a local git repository plus task.yaml
files whose commands are shell one-liners, so an attempt takes milliseconds) and runs pytest in a
subprocess with the local sandbox. Nothing here needs Docker or the bundled taskpacks. Each
test is a whole plugin run (seconds each, half a minute for xdist), hence the e2e tier. The pack
and the run helpers are in tests/support/tiny_pack.py.
"""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

import pytest

from pytest_agentbench.run.hostenv import work_root
from tests.support.run_dirs import run_dirs as dirs_under
from tests.support.tiny_pack import (
    FIXED,
    FLIP_FLOP,
    ORACLE_PATCH,
    SUITE,
    Pack,
    attempts,
    by_task,
    only_run_dir,
    output,
    run,
    run_dirs,
    run_suite,
    sections,
)

USAGE_ERROR = 4  # pytest.ExitCode.USAGE_ERROR


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def pack(pytester: pytest.Pytester) -> Pack:
    return Pack(pytester.path)


@pytest.fixture
def standard(pack: Pack) -> Pack:
    """Two valid tasks, an invalid one (baseline passes) and a flaky, quarantined one."""
    pack.task("good-a", labels=("alpha-label",))
    pack.task("good-b", labels=("beta-label", "multi"))
    pack.task("already-passes", failing="true", oracle=False)
    pack.task("flip-flop", failing=FLIP_FLOP, labels=("flaky",), oracle=False)
    return pack


# --------------------------------------------------------------------------- activation


def test_inert_without_agentbench_options(pytester: pytest.Pytester, pack: Pack) -> None:
    pack.task("good-a")
    pytester.makepyfile(test_plain="def test_one():\n    assert 1 + 1 == 2\n")
    result = run(pytester)  # --agentbench-sandbox alone does not activate the plugin
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    assert "run dir:" not in result.stdout.str()  # no agentbench terminal section
    result.stdout.no_fnmatch_line("*task.yaml*")  # taskpacks are not collected either
    assert not (pytester.path / "reports").exists()


def test_unknown_suite_is_a_usage_error_naming_the_suites(
    pytester: pytest.Pytester, pack: Pack
) -> None:
    pack.task("good-a")
    pack.task("other-task", suite="zeta")
    result = run(pytester, "--agentbench-suite", "does-not-exist")
    assert result.ret == USAGE_ERROR
    err = result.stderr.str()
    assert "no such suite 'does-not-exist'" in err
    assert "existing suites: synth, zeta" in err
    assert "Traceback" not in output(result)
    assert run_dirs(pytester) == []


def test_unknown_variant_is_a_usage_error(pytester: pytest.Pytester, standard: Pack) -> None:
    result = run_suite(pytester, "--agentbench-variant", "missing.yaml")
    assert result.ret == USAGE_ERROR
    assert "variant file missing.yaml: not found" in result.stderr.str()
    assert "Traceback" not in output(result)


# --------------------------------------------------------------------------- outcome mapping


def test_oracle_outcomes_and_records(pytester: pytest.Pytester, standard: Pack) -> None:
    result = run_suite(pytester, "-rA")
    result.assert_outcomes(passed=2, errors=1, xfailed=1)
    records = by_task(attempts(only_run_dir(pytester)))
    assert set(records) == {"good-a", "good-b", "already-passes", "flip-flop"}
    assert records["good-a"]["result"]["passed"] is True
    assert records["good-a"]["pytest_outcome"] == "passed"
    bad = records["already-passes"]
    assert bad["result"]["failure_reason"] == "BASELINE_NOT_FAILING"
    assert bad["pytest_outcome"] == "error"
    flaky = records["flip-flop"]
    assert flaky["result"]["failure_reason"] == "BASELINE_FLAKY"
    assert flaky["baseline_validation"]["is_flaky"] is True
    assert [r["exit_code"] for r in flaky["baseline_validation"]["runs"]] == [1, 0]
    assert flaky["quarantined"] == "labelled flaky"
    assert flaky["pytest_outcome"] == "xfailed"
    error_text = sections(result, "ERROR at setup of agentbench task")["already-passes"]
    assert error_text == [
        "BASELINE_NOT_FAILING: failing_command passes before any change (2 runs): true",
        "  artifacts: tasks/already-passes",
    ]


def test_nop_fails_valid_tasks_with_a_short_text(pytester: pytest.Pytester, standard: Pack) -> None:
    result = run_suite(pytester, "--agentbench-variant", "nop", "-k", "good")
    result.assert_outcomes(failed=2)
    failures = sections(result, "agentbench task")
    assert set(failures) == {"good-a", "good-b"}
    for task_id, body in failures.items():
        assert body[0].startswith("TESTS_FAILED: passing_command exited 1"), body
        assert body[1:] == [f"  artifacts: tasks/{task_id}"], body
    assert "Traceback" not in output(result)
    records = attempts(only_run_dir(pytester))
    assert {
        (r["task_id"], r["result"]["failure_reason"], r["pytest_outcome"]) for r in records
    } == {
        ("good-a", "TESTS_FAILED", "failed"),
        ("good-b", "TESTS_FAILED", "failed"),
    }


# --------------------------------------------------------------------------- malformed task files


def test_malformed_task_files_are_one_line_errors(pytester: pytest.Pytester, pack: Pack) -> None:
    good = pack.task("good-a")
    pack.task("good-b")
    text = good.read_text()
    cases = {
        "unknown-key": (text.replace("id: good-a", "id: unknown-key\nagnet: {}"), "agnet"),
        "wrong-type": (
            text.replace("id: good-a", "id: wrong-type").replace(
                "timeout_sec: 120", "timeout_sec: soon"
            ),
            "environment.timeout_sec",
        ),
        "missing-field": (
            re.sub(r"  passing_command: .*\n", "", text.replace("id: good-a", "id: missing-field")),
            "validation.passing_command",
        ),
        "syntax-error": (text.replace("id: good-a", "id: [syntax-error"), "line 3, column 6"),
        # a copy of good-a under another folder: its id is not its folder's name (which also
        # keeps two folders of one suite from ever holding the same task id)
        "zz-copy-of-good-a": (text, "id"),
    }
    for name, (body, _) in cases.items():
        pack.write(name, body)
    result = run_suite(pytester, "-rA")
    result.assert_outcomes(passed=2, errors=len(cases))
    errors = sections(result, "ERROR at setup of invalid task")
    assert set(errors) == set(cases)
    expected_message = {
        "unknown-key": "unknown key (did you mean 'agent'?)",
        "wrong-type": "expected a number, got 'soon'",
        "missing-field": "field required",
        "syntax-error": "YAML syntax error",
        "zz-copy-of-good-a": "'good-a' does not match its directory 'zz-copy-of-good-a'",
    }
    for name, (_, field) in cases.items():
        lines = errors[name]
        assert len(lines) == 1, (name, lines)
        assert lines[0].startswith(f"taskpacks/{SUITE}/{name}/task.yaml: {field}"), lines
        assert expected_message[name] in lines[0], lines
    assert "Traceback" not in output(result)
    records = by_task(attempts(only_run_dir(pytester)))
    assert {k: v["pytest_outcome"] for k, v in records.items()} == {
        "good-a": "passed",
        "good-b": "passed",
        **{name: "error" for name in cases},
    }
    for name in cases:  # each invalid task has its record: TASK_INVALID, the problem, no run
        result_ = records[name]["result"]
        assert result_["failure_reason"] == "TASK_INVALID" and not result_["passed"]
        assert result_["summary"] == errors[name][0], (result_, errors[name])
        assert records[name]["suite"] == SUITE and records[name]["duration_sec"] == 0.0


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
    assert result.ret == USAGE_ERROR
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


# --------------------------------------------------------------------------- resume


def test_resume_runs_only_the_missing_attempts(pytester: pytest.Pytester, standard: Pack) -> None:
    run_suite(pytester, "-k", "good-a").assert_outcomes(passed=1, deselected=3)
    run_dir = only_run_dir(pytester)
    resumed = run_suite(pytester, "--agentbench-resume", str(run_dir))
    resumed.assert_outcomes(passed=1, errors=1, xfailed=1, deselected=1)
    assert run_dirs(pytester) == [run_dir]  # appended to the same run, no new run dir
    records = attempts(run_dir)
    assert sorted(r["task_id"] for r in records) == [
        "already-passes",
        "flip-flop",
        "good-a",
        "good-b",
    ]
    assert len({r["run_id"] for r in records}) == 1
    assert len(json.loads((run_dir / "run.json").read_text())["sessions"]) == 2
    again = run_suite(pytester, "--agentbench-resume", str(run_dir))
    again.assert_outcomes(deselected=4)
    assert len(attempts(run_dir)) == 4


def test_resume_with_a_different_variant_is_refused(
    pytester: pytest.Pytester, standard: Pack
) -> None:
    run_suite(pytester, "-k", "good-a").assert_outcomes(passed=1, deselected=3)
    run_dir = only_run_dir(pytester)
    before = (run_dir / "attempts.jsonl").read_bytes()
    result = run_suite(pytester, "--agentbench-resume", str(run_dir), "--agentbench-variant", "nop")
    assert result.ret == USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.strip()]
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"ERROR: --agentbench-resume {run_dir}: the configuration differs")
    assert "variant" in errors[0]
    assert (run_dir / "attempts.jsonl").read_bytes() == before


@pytest.mark.parametrize(
    ("changed", "field"),
    [(("--agentbench-attempts", "2"), "attempts"), (("--agentbench-suite", "zeta"), "suites")],
)
def test_resume_with_other_run_options_is_refused(
    pytester: pytest.Pytester, standard: Pack, changed: tuple[str, str], field: str
) -> None:
    standard.task("other-task", suite="zeta")
    run_suite(pytester, "-k", "good-a").assert_outcomes(passed=1, deselected=3)
    run_dir = only_run_dir(pytester)
    result = run_suite(pytester, "--agentbench-resume", str(run_dir), "-k", "good-a", *changed)
    assert result.ret == USAGE_ERROR
    assert "the configuration differs" in result.stderr.str()
    assert field in result.stderr.str()
    assert len(attempts(run_dir)) == 1


def test_resume_of_a_directory_that_is_no_run(pytester: pytest.Pytester, standard: Pack) -> None:
    not_a_run = pytester.mkdir("elsewhere")
    result = run_suite(pytester, "--agentbench-resume", str(not_a_run))
    assert result.ret == USAGE_ERROR
    assert "no run.json there (not a run directory)" in result.stderr.str()
    assert "Traceback" not in output(result)


# --------------------------------------------------------------------------- third-party agents

THIRD_PARTY_CONFTEST = '''
from pytest_agentbench.agents.port import AgentOutcome


class WriteGood:
    name = "write-good"

    def run(self, ctx):
        result = ctx.toolbox.call("write_file", {"path": "value.txt", "content": "good\\n"})
        return AgentOutcome("done", summary=f"wrote: {result.ok}", steps=1)


def pytest_agentbench_agents():
    return {"write-good": WriteGood}
'''


def test_a_plugin_hook_registers_an_agent(pytester: pytest.Pytester, pack: Pack) -> None:
    pack.task("good-a", oracle=False)
    pytester.makeconftest(THIRD_PARTY_CONFTEST)
    result = run_suite(pytester, "--agentbench-variant", "write-good")
    result.assert_outcomes(passed=1)
    (record,) = attempts(only_run_dir(pytester))
    assert record["variant"] == "write-good" and record["agent"]["changed_files"] == ["value.txt"]


def test_unknown_agent_is_a_usage_error(pytester: pytest.Pytester, pack: Pack) -> None:
    pack.task("good-a")
    result = run_suite(pytester, "--agentbench-variant", "no-such-agent")
    assert result.ret == USAGE_ERROR
    assert "unknown agent 'no-such-agent'" in result.stderr.str()
    assert "Traceback" not in output(result)


# --------------------------------------------------------------------------- env snapshots


def setup_task(pack: Pack, task_id: str, setup: str) -> None:
    pack.write(task_id, "\n".join([
        "task_spec_version: 1", f"id: {task_id}", f"suite: {SUITE}",
        "repo:", "  url: ../../_repos/tiny", f"  commit: {pack.commit}",
        "setup:", f"  commands: [{json.dumps(setup)}]",
        "validation:", f"  failing_command: {json.dumps(FIXED)}",
        f"  passing_command: {json.dumps(FIXED)}",
    ]) + "\n")
    (pack.root / SUITE / task_id / "oracle.patch").write_text(ORACLE_PATCH)


def environment_of(pytester: pytest.Pytester, task_id: str) -> dict[str, Any]:
    run_dir = run_dirs(pytester)[-1]
    return json.loads((run_dir / "tasks" / task_id / "meta" / "environment.json").read_text())


def test_env_snapshot_is_reused_on_the_second_run(pytester: pytest.Pytester, pack: Pack) -> None:
    setup_task(pack, "envy", 'mkdir -p "$PYTHONUSERBASE/m" && touch "$PYTHONUSERBASE/m/x"')
    cache = pytester.path / "env-cache"
    for expected_reuse in (False, True):
        run_suite(pytester, f"--agentbench-env-cache={cache}").assert_outcomes(passed=1)
        record = attempts(run_dirs(pytester)[-1])[0]
        assert record["setup"]["reused_snapshot"] is expected_reuse
    assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 1


def test_what_setup_writes_into_the_workspace_is_cached_with_it(
    pytester: pytest.Pytester, pack: Pack
) -> None:
    """Issue 10: an in-place build (here one untracked file) is part of the snapshot; before,
    such a setup was never cached and ran again on every attempt."""
    setup_task(pack, "inplace", "test ! -e built.txt && echo built > built.txt")
    cache = pytester.path / "env-cache"
    for verdict in ("built", "hit"):
        run_suite(pytester, f"--agentbench-env-cache={cache}").assert_outcomes(passed=1)
        record = attempts(run_dirs(pytester)[-1])[0]
        assert record["setup"]["env_cache"] == verdict
    (entry,) = [p for p in cache.iterdir() if not p.name.startswith(".")]
    assert (entry / "repo" / "built.txt").read_text() == "built\n"

