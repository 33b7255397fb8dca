"""Two pytest sessions under one run name at once (a named run in two projects, or two CI jobs on
one machine) leave each other alone: each has its own work root and sweeps only its own
containers. A CI run saw a baseline named `baseline` lose two attempts (their checkouts gone
mid-attempt: "Unable to read current working directory", a missing recorded diff) when another
test's run of the same name ended and removed the work root they shared."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.support.run_dirs import run_dirs
from tests.support.tiny_pack import FIXED, SUITE, Pack, attempts


def session(project: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--agentbench-sandbox",
            "local", "--agentbench-suite", SUITE, "--agentbench-run-name=same",
            f"--rootdir={project}"]


def test_a_session_that_ends_leaves_another_of_the_same_name_running(tmp_path: Path) -> None:
    slow, quick = tmp_path / "slow", tmp_path / "quick"
    for project in (slow, quick):
        project.mkdir()
    slow_pack = Pack(slow)
    for i in range(2):  # each baseline run takes 2 s: the quick session ends inside them
        slow_pack.task(f"s{i}", failing=f"sleep 2; {FIXED}")
    Pack(quick).task("q0")
    running = subprocess.Popen(session(slow), cwd=slow, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(3)  # inside the slow session's first attempt
        assert running.poll() is None
        done = subprocess.run(session(quick), cwd=quick, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stdout[-3000:]
        assert running.poll() is None, "the slow session was meant to outlive the quick one"
        out, _ = running.communicate(timeout=300)
    finally:
        if running.poll() is None:
            running.kill()
    assert running.returncode == 0, out[-4000:]
    (run_dir,) = [d for d in run_dirs(slow / "reports" / "runs") if d.name == "same"]
    records = attempts(run_dir)
    assert sorted(r["task_id"] for r in records) == ["s0", "s1"]
    assert all(r["result"]["passed"] for r in records), [r["result"] for r in records]


def test_the_sweep_of_a_session_keeps_a_live_sessions_containers(
        docker_sandboxes: object, tmp_path: Path) -> None:
    """The end of a run removes its containers by run id: only its own session's, and those of
    a session whose creator is gone, never those of another live session of the same name."""
    import uuid
    from dataclasses import replace

    from pytest_agentbench.sandbox.port import SESSION_LABEL
    from tests.support.sandboxes import small_spec

    run_id = f"same-{uuid.uuid4().hex[:8]}"
    spec = small_spec(tmp_path)
    opened = {name: docker_sandboxes.open(replace(  # type: ignore[attr-defined]
        spec, labels={"agentbench.run_id": run_id, SESSION_LABEL: name}))
        for name in ("mine", "theirs")}
    try:
        removed = docker_sandboxes.sweep(  # type: ignore[attr-defined]
            {"agentbench.run_id": run_id}, session="mine")
        assert removed == 1
        assert opened["theirs"].exec("true", timeout_sec=30).ok  # still there, still running
    finally:
        for sandbox in opened.values():
            sandbox.close()
