"""The plugin end to end on the bundled custom-dev suite with the local sandbox (no Docker).

The local sandbox runs each task's commands unisolated on the host, so these runs are fast
enough to exercise selection, xdist, attempts, quarantine and resume on the real taskpacks.
The one task that pip-installs during setup (fix-toml-nested-lookup) is left out: on the local
sandbox its `pip` is whatever the host PATH has (see the report in the test docstring below).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.run.hostenv import work_root
from tests.support.plugin_runs import (
    FLAKY_TASK,
    INVALID_TASK,
    SUITE,
    TASKPACKS,
    PluginRunner,
    PytestRun,
    RunDir,
    only_run_dir,
    parse_outcomes,
    python_m_pytest,
    run_pytest,
    sequence_problems,
)

USAGE_ERROR = 4
ONE_TASK = "fix-mean-off-by-one"
# Four tasks the oracle solves on the local sandbox: resume needs a run long enough to kill.
RESUME_TASKS = (
    "fix-mean-off-by-one",
    "fix-parse-size-units",
    "remove-stale-override",
    "restore-slug-module",
)


@pytest.fixture
def runner(tmp_path: Path) -> PluginRunner:
    return PluginRunner(tmp_path, sandbox="local")


def collected_names(run: PytestRun) -> list[str]:
    return [line.rsplit("::", 1)[1] for line in run.stdout.splitlines() if "::" in line]


# --------------------------------------------------------------------------- selection


def test_k_task_id_runs_exactly_that_task(runner: PluginRunner) -> None:
    run = runner.run("-k", ONE_TASK)
    run.assert_outcomes(passed=1, deselected=7)
    assert run.returncode == 0, run.tail()
    run_dir = run.run_dir
    (record,) = run_dir.records()
    assert record["task_id"] == ONE_TASK and record["pytest_outcome"] == "passed"
    assert record["image"]["name"] == "local"
    task_dir = run_dir.task_dir(ONE_TASK)
    assert record["artifact_paths"]["task_dir"] == f"tasks/{ONE_TASK}"
    assert (task_dir / "task.yaml").read_bytes() == (
        TASKPACKS / SUITE / ONE_TASK / "task.yaml"
    ).read_bytes()
    assert (
        "FAILED tests/test_mathx.py::test_mean"
        in (task_dir / "logs" / "failing_stdout.txt").read_text()
    )
    assert (
        "+    return sum(values) / len(values)" in (task_dir / "diffs" / "final.patch").read_text()
    )
    calls = [json.loads(line) for line in (task_dir / "agent" / "tool_calls.jsonl").open()]
    assert [c["tool"] for c in calls] == ["apply_patch"]
    timings = json.loads((task_dir / "meta" / "timings.json").read_text())
    assert {"prepare", "setup", "baseline", "agent", "score"} <= set(timings)
    assert not (run_dir.task_dir("fix-parse-size-units")).exists()  # deselected: no artifacts
    work = work_root(run_dir.run_id)
    assert not work.exists() or list(work.iterdir()) == []  # the checkout was removed


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("multi-file", ["fix-parse-size-units"]),
        ("one-line or new-file", ["fix-mean-off-by-one", "restore-slug-module"]),
        ("invalid-example", [INVALID_TASK]),
        ("flaky", [FLAKY_TASK]),
        (SUITE, None),  # the suite name is a keyword of every task
    ],
)
def test_k_selects_by_label(
    runner: PluginRunner, expression: str, expected: list[str] | None
) -> None:
    run = runner.run("--collect-only", "-q", "-k", expression)
    assert run.returncode == 0, run.tail()
    names = collected_names(run)
    if expected is None:
        assert len(names) == 8 and len(set(names)) == 8
    else:
        assert names == expected


def test_unknown_suite_names_the_existing_ones(runner: PluginRunner) -> None:
    run = runner.run("--agentbench-suite", "does-not-exist")
    assert run.returncode == USAGE_ERROR, run.tail()
    (line,) = [line for line in run.stderr.splitlines() if line.strip()]
    assert line.startswith("ERROR: ")
    assert "no such suite 'does-not-exist'" in line
    assert "existing suites: custom-dev, custom-heldout" in line
    assert not runner.out.exists()


# --------------------------------------------------------------------------- xdist


def test_xdist_records_the_same_attempts_as_a_serial_run(runner: PluginRunner) -> None:
    selection = ("-k", f"{ONE_TASK} or {INVALID_TASK} or {FLAKY_TASK}")
    serial = runner.run(*selection, out=runner.root / "serial")
    parallel = runner.run(*selection, "-n", "2", out=runner.root / "parallel")
    serial.assert_outcomes(passed=1, errors=1, xfailed=1, deselected=5)
    parallel.assert_outcomes(passed=1, errors=1, xfailed=1)  # xdist does not count deselected
    assert parallel.xdist_items == 3

    def summary(run_dir: RunDir) -> list[tuple[Any, ...]]:
        return sorted(
            (r["task_id"], r["attempt_index"], r["pytest_outcome"], r["result"]["failure_reason"])
            for r in run_dir.records()
        )

    assert len(serial.run_dir.attempt_lines()) == len(parallel.run_dir.attempt_lines()) == 3
    assert summary(serial.run_dir) == summary(parallel.run_dir)
    assert {r["worker"] for r in serial.run_dir.records()} == {"master"}
    assert {r["worker"] for r in parallel.run_dir.records()} <= {"gw0", "gw1"}
    for run in (serial, parallel):
        assert sequence_problems(run.run_dir.events()) == []
        assert not (run.run_dir.path / "events").exists()  # worker parts merged and removed


# --------------------------------------------------------------------------- attempts


def test_two_attempts_per_task(runner: PluginRunner) -> None:
    run = runner.run("-k", ONE_TASK, "--agentbench-attempts", "2", "-n", "2", "-v")
    run.assert_outcomes(passed=2)
    assert run.xdist_items == 2
    for n in (1, 2):
        assert f"::{ONE_TASK}[oracle-attempt{n}] " in run.stdout, run.tail()
    records = run.run_dir.records()
    assert sorted(r["attempt_index"] for r in records) == [0, 1]
    assert len({r["attempt_id"] for r in records}) == 2
    for record in records:
        label = f"attempt-{record['attempt_index'] + 1}"
        assert record["artifact_paths"]["task_dir"] == f"tasks/{ONE_TASK}/{label}"
        task_dir = run.run_dir.task_dir(ONE_TASK, label)
        assert (task_dir / "task.yaml").is_file()
        assert (task_dir / "logs" / "failing_stdout.txt").stat().st_size > 0
        assert (task_dir / "diffs" / "final.patch").stat().st_size > 0
    assert not (run.run_dir.task_dir(ONE_TASK) / "logs").exists()  # nothing at the task level


# --------------------------------------------------------------------------- quarantine


def test_quarantine_skip_never_runs_the_flaky_task(runner: PluginRunner) -> None:
    run = runner.run("-k", FLAKY_TASK, "--agentbench-quarantine", "skip", "-rs")
    run.assert_outcomes(skipped=1, deselected=7)
    assert run.returncode == 0, run.tail()
    assert "quarantined: fails differently on every run" in run.stdout
    assert run.run_dir.records() == []
    assert not run.run_dir.task_dir(FLAKY_TASK).exists()


def test_quarantine_only_runs_just_the_flaky_task_uncovered(runner: PluginRunner) -> None:
    run = runner.run("--agentbench-quarantine", "only")
    run.assert_outcomes(errors=1, deselected=7)
    (record,) = run.run_dir.records()
    assert record["task_id"] == FLAKY_TASK
    assert record["result"]["failure_reason"] == "BASELINE_FLAKY"
    assert record["baseline_validation"]["is_flaky"] is True
    assert record["quarantined"] == "fails differently on every run (kept to prove flake detection)"
    assert record["pytest_outcome"] == "error"


# --------------------------------------------------------------------------- resume


@dataclass
class KilledRun:
    run_dir: RunDir
    recorded_before_kill: list[str]
    in_flight: set[str]  # attempt ids that had started (and prepared a workspace) when killed
    resumed: PytestRun
    runner: PluginRunner


def _in_flight(run_dir: Path, recorded: set[str]) -> set[str]:
    """Attempts whose workspace was prepared but that have no record yet (from worker events)."""
    started = set()
    for part in (run_dir / "events").glob("*.jsonl"):
        for line in part.read_text("utf-8").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("type") == "phase_finished" and event.get("phase") == "prepare":
                started.add(event["attempt_id"])
    return started - recorded


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Start a run, SIGKILL it (controller, workers, sandbox commands) once two attempts are
    recorded and another is under way, then resume it with the same options."""
    runner = PluginRunner(tmp_path_factory.mktemp("resume"), sandbox="local")
    selection = ["-n", "2", "-k", " or ".join(RESUME_TASKS)]
    proc = subprocess.Popen(
        python_m_pytest(runner.args(*selection)),
        cwd=runner.root,
        env=runner.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    run_dir: Path | None = None
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            dirs = list(runner.out.glob("*/run.json"))
            if dirs:
                run_dir = dirs[0].parent
                recorded = RunDir(run_dir).records()
                ids = {r["attempt_id"] for r in recorded}
                if len(recorded) >= 2 and _in_flight(run_dir, ids):
                    break
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(60)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed half-way"
    assert run_dir is not None
    before = RunDir(run_dir).records()
    in_flight = _in_flight(run_dir, {r["attempt_id"] for r in before})
    resumed = run_pytest(
        runner.args(*selection, f"--agentbench-resume={run_dir}"),
        cwd=runner.root,
        env=runner.env(),
        out=runner.out,
    )
    yield KilledRun(RunDir(run_dir), [r["task_id"] for r in before], in_flight, resumed, runner)
    meta = json.loads((run_dir / "run.json").read_text())
    shutil.rmtree(work_root(meta["run_id"]), ignore_errors=True)


def test_resume_records_every_attempt_exactly_once(killed_and_resumed: KilledRun) -> None:
    killed = killed_and_resumed
    assert 2 <= len(killed.recorded_before_kill) < len(RESUME_TASKS)
    assert killed.in_flight, "no attempt was under way when the run was killed"
    missing = len(RESUME_TASKS) - len(killed.recorded_before_kill)
    assert killed.resumed.xdist_items == missing, killed.resumed.tail()
    outcomes = killed.resumed.outcomes
    assert sum(outcomes.get(k, 0) for k in ("passed", "failed", "errors")) == missing
    records = killed.run_dir.records()  # every line valid against AttemptRecord
    assert Counter(r["task_id"] for r in records) == Counter(RESUME_TASKS)
    assert only_run_dir(killed.runner.out).path == killed.run_dir.path  # appended, no new run
    assert len({r["run_id"] for r in records}) == 1
    assert len(killed.run_dir.meta["sessions"]) == 2
    noun = "attempt" if missing == 1 else "attempts"  # the session's count beside the run's
    assert (f"{missing} {noun} recorded in this session ({missing} passed), "
            f"{len(RESUME_TASKS)} in the run") in killed.resumed.text, killed.resumed.tail()


def test_resume_reruns_the_killed_attempt_cleanly(killed_and_resumed: KilledRun) -> None:
    records = killed_and_resumed.run_dir.records_by_task()
    assert {k: v["pytest_outcome"] for k, v in records.items()} == dict.fromkeys(
        RESUME_TASKS, "passed"
    ), killed_and_resumed.resumed.tail()


def test_resume_keeps_one_event_sequence_per_attempt(killed_and_resumed: KilledRun) -> None:
    assert sequence_problems(killed_and_resumed.run_dir.events()) == []


def test_resume_with_another_variant_is_refused(killed_and_resumed: KilledRun) -> None:
    killed = killed_and_resumed
    lines_before = killed.run_dir.attempt_lines()
    run = killed.runner.run(
        "-k",
        " or ".join(RESUME_TASKS),
        "--agentbench-variant",
        "nop",
        f"--agentbench-resume={killed.run_dir.path}",
    )
    assert run.returncode == USAGE_ERROR, run.tail()
    (line,) = [line for line in run.stderr.splitlines() if line.strip()]
    assert line.startswith(
        f"ERROR: --agentbench-resume {killed.run_dir.path}: the configuration "
        "differs from the recorded run (variant, variant_config_hash)"
    )
    assert "Traceback" not in run.text
    assert killed.run_dir.attempt_lines() == lines_before


def test_outcome_summary_parser_is_sound() -> None:
    """The helper the whole file relies on reads pytest's own summary line."""
    line = "==== 6 passed, 1 xfailed, 1 error, 7 deselected, 4 warnings in 65.28s (0:01:05) ===="
    assert parse_outcomes(line) == {"passed": 6, "xfailed": 1, "errors": 1, "deselected": 7}
