"""The pytest plugin on synthetic taskpacks (tests/support/tiny_pack.py): resuming a run and
the env snapshots reused across runs. Each test is a whole plugin run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.tiny_pack import (
    FIXED,
    ORACLE_PATCH,
    SUITE,
    Pack,
    attempts,
    newest_run_dir,
    only_run_dir,
    output,
    run_dirs,
    run_suite,
)

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
    assert result.ret == pytest.ExitCode.USAGE_ERROR
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
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "the configuration differs" in result.stderr.str()
    assert field in result.stderr.str()
    assert len(attempts(run_dir)) == 1


def test_resume_of_a_directory_that_is_no_run(pytester: pytest.Pytester, standard: Pack) -> None:
    not_a_run = pytester.mkdir("elsewhere")
    result = run_suite(pytester, "--agentbench-resume", str(not_a_run))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "no run.json there (not a run directory)" in result.stderr.str()
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
    run_dir = newest_run_dir(pytester)
    return json.loads((run_dir / "tasks" / task_id / "meta" / "environment.json").read_text())


def test_env_snapshot_is_reused_on_the_second_run(pytester: pytest.Pytester, pack: Pack) -> None:
    setup_task(pack, "envy", 'mkdir -p "$PYTHONUSERBASE/m" && touch "$PYTHONUSERBASE/m/x"')
    cache = pytester.path / "env-cache"
    for expected_reuse in (False, True):
        run_suite(pytester, f"--agentbench-env-cache={cache}").assert_outcomes(passed=1)
        record = attempts(newest_run_dir(pytester))[0]
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
        record = attempts(newest_run_dir(pytester))[0]
        assert record["setup"]["env_cache"] == verdict
    (entry,) = [p for p in cache.iterdir() if not p.name.startswith(".")]
    assert (entry / "repo" / "built.txt").read_text() == "built\n"

