"""The plugin end to end on the bundled custom-dev suite in Docker sandboxes.

One oracle run of the whole suite with two xdist workers is shared by most tests (about a minute
on two cores); a nop run and the Ctrl-C runs pick a few tasks with -k. Without a Docker daemon
these tests skip, except under CI=true, where they fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from pytest_agentbench.run.hostenv import work_root
from tests.support.plugin_runs import (
    ALL_TASKS,
    FLAKY_TASK,
    INVALID_TASK,
    SUITE,
    TASKPACKS,
    VALID_TASKS,
    PluginRunner,
    PytestRun,
    RunDir,
    agentbench_args,
    containers_of,
    first_containers,
    python_m_pytest,
    section_bodies,
    sequence_problems,
)

# --------------------------------------------------------------------------- the oracle run


@pytest.fixture(scope="module")
def oracle_run(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> PytestRun:
    return PluginRunner(tmp_path_factory.mktemp("oracle")).run("-n", "2")


def test_oracle_outcomes(oracle_run: PytestRun) -> None:
    oracle_run.assert_outcomes(passed=6, xfailed=1, errors=1)
    assert oracle_run.returncode == 1  # the invalid task's ERROR fails the session
    assert oracle_run.xdist_items == len(ALL_TASKS)
    assert "Traceback" not in oracle_run.text


def test_oracle_records_one_valid_line_per_attempt(oracle_run: PytestRun) -> None:
    run_dir = oracle_run.run_dir
    assert len(run_dir.attempt_lines()) == len(ALL_TASKS)
    records = run_dir.records_by_task()  # each line validated against AttemptRecord
    assert sorted(records) == list(ALL_TASKS)
    outcomes = {task: record["pytest_outcome"] for task, record in records.items()}
    assert outcomes == {
        **dict.fromkeys(VALID_TASKS, "passed"),
        INVALID_TASK: "error",
        FLAKY_TASK: "xfailed",
    }
    for record in records.values():
        assert record["run_id"] == run_dir.run_id
        assert record["worker"] in ("gw0", "gw1")
        assert record["attempt_index"] == 0
        assert record["image"]["id"], "a docker run records the runner image id"
        assert record["result"]["passed"] == (record["task_id"] in VALID_TASKS)


def test_oracle_reason_codes_of_the_broken_tasks(oracle_run: PytestRun) -> None:
    records = oracle_run.run_dir.records_by_task()
    invalid, flaky = records[INVALID_TASK], records[FLAKY_TASK]
    assert invalid["result"]["failure_reason"] == "BASELINE_NOT_FAILING"
    assert invalid["baseline_validation"]["failed_as_expected"] is False
    assert [run["exit_code"] for run in invalid["baseline_validation"]["runs"]] == [0, 0]
    assert flaky["result"]["failure_reason"] == "BASELINE_FLAKY"
    assert flaky["baseline_validation"]["is_flaky"] is True
    assert len(flaky["baseline_validation"]["flake_failure_modes"]) >= 2
    assert flaky["quarantined"]
    for task in VALID_TASKS:
        assert records[task]["result"]["failure_reason"] is None
    error_text = section_bodies(oracle_run.stdout, "ERROR at setup of agentbench task")
    assert list(error_text) == [INVALID_TASK]
    assert error_text[INVALID_TASK][0].startswith("BASELINE_NOT_FAILING: ")
    assert error_text[INVALID_TASK][1:] == [f"  artifacts: tasks/{INVALID_TASK}"]


def test_oracle_events_are_valid_and_ordered(oracle_run: PytestRun) -> None:
    run_dir = oracle_run.run_dir
    events = run_dir.events()  # each line validated against the event union
    assert sequence_problems(events) == []
    attempt_ids = {r["attempt_id"] for r in run_dir.records()}
    assert {e["attempt_id"] for e in events} == attempt_ids
    for kind in ("task_started", "task_finished"):
        started = [e["attempt_id"] for e in events if e["type"] == kind]
        assert sorted(started) == sorted(attempt_ids), kind
    assert {e["run_id"] for e in events} == {run_dir.run_id}
    assert not (run_dir.path / "events").exists()  # the worker parts were merged


def test_oracle_task_artifacts(oracle_run: PytestRun) -> None:
    run_dir = oracle_run.run_dir
    assert (run_dir.path / "run.json").is_file()
    summary = (run_dir.path / "report_summary.md").read_text()
    assert run_dir.run_id in summary
    for task in ALL_TASKS:
        task_dir = run_dir.task_dir(task)
        frozen = (task_dir / "task.yaml").read_bytes()
        assert frozen == (TASKPACKS / SUITE / task / "task.yaml").read_bytes(), task
        assert (task_dir / "logs" / "failing_stdout.txt").stat().st_size > 0, task
        for meta in ("timings.json", "environment.json"):
            json.loads((task_dir / "meta" / meta).read_text())
    for task in VALID_TASKS:
        task_dir = run_dir.task_dir(task)
        assert (task_dir / "diffs" / "final.patch").read_text().startswith("diff --git"), task
        calls = (task_dir / "agent" / "tool_calls.jsonl").read_text().splitlines()
        assert [json.loads(c)["tool"] for c in calls] == ["apply_patch"], task
    assert (run_dir.task_dir("restore-slug-module") / "diffs" / "final.patch").read_text().count(
        "new file mode"
    ) == 1
    assert (
        "deleted file mode"
        in (run_dir.task_dir("remove-stale-override") / "diffs" / "final.patch").read_text()
    )


def test_oracle_run_leaves_no_container(oracle_run: PytestRun, docker_client: Any) -> None:
    assert containers_of(docker_client, oracle_run.run_dir.run_id) == []
    assert leftover_workspaces(oracle_run.run_dir.run_id) == []


# --------------------------------------------------------------------------- nop


def test_nop_fails_valid_tasks_with_tests_failed(docker_client: Any, tmp_path: Path) -> None:
    run = PluginRunner(tmp_path).run("-n", "2", "-k", "mean or slug", "--agentbench-variant", "nop")
    run.assert_outcomes(failed=2)
    assert run.xdist_items == 2
    failures = section_bodies(run.stdout, "agentbench task")
    assert sorted(failures) == ["fix-mean-off-by-one", "restore-slug-module"]
    for task, body in failures.items():
        assert len(body) == 2, body
        assert body[0].startswith("TESTS_FAILED: passing_command exited "), body
        assert body[0].endswith("agent: nop agent made no changes"), body
        assert body[1] == f"  artifacts: tasks/{task}"
    assert "Traceback" not in run.text
    records = run.run_dir.records_by_task()
    assert {
        t: (r["result"]["failure_reason"], r["pytest_outcome"]) for t, r in records.items()
    } == {
        "fix-mean-off-by-one": ("TESTS_FAILED", "failed"),
        "restore-slug-module": ("TESTS_FAILED", "failed"),
    }
    for task in records:
        assert (run.run_dir.task_dir(task) / "diffs" / "final.patch").read_text() == ""
    assert containers_of(docker_client, run.run_dir.run_id) == []


# --------------------------------------------------------------------------- Ctrl-C


@pytest.fixture
def interrupted_workspace(tmp_path: Path, docker_client: Any) -> Iterator[PluginRunner]:
    workspace = PluginRunner(tmp_path)
    yield workspace
    for run_json in workspace.out.glob("*/run.json"):  # never leak, even when the test fails
        run_id = run_json.parent.name
        for container_id in containers_of(docker_client, run_id):
            with contextlib.suppress(docker.errors.NotFound):
                docker_client.api.remove_container(container_id, force=True)
        shutil.rmtree(work_root(run_id), ignore_errors=True)


def listing(root: Path, limit: int = 40) -> list[str]:
    """What a leftover work directory holds (for the failure message)."""
    if not root.is_dir():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))[:limit]


def leftover_workspaces(run_id: str) -> list[str]:
    root = work_root(run_id)
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


@pytest.mark.parametrize(
    ("extra", "whole_group"),
    [
        (("-n", "2"), True),
        ((), False),
        (("-n", "2"), False),
    ],
    ids=["xdist-terminal-ctrl-c", "serial-sigint-to-pytest", "xdist-sigint-to-pytest"],
)
def test_ctrl_c_leaves_no_container(
    interrupted_workspace: PluginRunner,
    docker_client: Any,
    extra: tuple[str, ...],
    whole_group: bool,
) -> None:
    """SIGINT while sandboxes are up: pytest exits as interrupted, without a traceback, and
    neither a container nor a host checkout of the run is left behind."""
    workspace = interrupted_workspace
    args = agentbench_args(workspace.out, *extra, "-k", "mean or slug or size")
    proc = subprocess.Popen(
        python_m_pytest(args),
        cwd=workspace.root,
        env=workspace.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    run_id: str | None = None
    try:
        run_id, seen = first_containers(workspace.out, docker_client, proc, 180)
        assert seen, "no sandbox container appeared before the run ended"
        # A terminal's Ctrl-C signals the whole foreground process group (controller, xdist
        # workers, their children); `kill -INT <pid>` signals pytest alone.
        if whole_group:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert run_id is not None
    assert proc.returncode == 2, output[-4000:]  # pytest's INTERRUPTED
    assert "KeyboardInterrupt" in output
    assert "Traceback" not in output
    assert containers_of(docker_client, run_id) == [], output[-4000:]
    for line in RunDir(workspace.out / run_id).attempt_lines():
        json.loads(line)  # whatever was recorded before the interrupt is whole
    left = leftover_workspaces(run_id)
    assert left == [], (left, listing(work_root(run_id)), output[-4000:])
