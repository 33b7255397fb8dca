"""Red team of c3dfc1f: a hostile command between the two snapshots its Docker exec takes (the
pending step's before it, its own after it; policy.PROLOGUE / EPILOGUE, git_scripts.CHAIN,
RecordingToolbox._exec_around).

Held: a command that lowers its wrapper's resource limits (prlimit needs no ptrace access, so it
works on the execute-only shell too) only makes the after-snapshot fail, never say "unchanged";
a late writer it leaves behind is reaped before the after-snapshot, also when it times out.

Found, and fixed with these tests (each failed before: strict xfails in 70657c7): an
after-snapshot that ran git but whose line the host does not read (any image without the
execute-only shell; or a step diff over EPILOGUE_MAX_BYTES) left the host's fingerprint stale, so
the next snapshot rebuilt the harness index from the base tree (every file hashed again) and
recorded a `snapshot_rebuilt` note as if the agent had tampered: now no after-snapshot runs where
its line is not read (`epilogues_read`), and one too large to come back says DEFER and the git
dir's fingerprint (git_scripts.AFTER_TAIL). And a wall-clock step during the exec left the
prologue's start (taken in the old clock) as the next snapshot's $REF: `clock_moved` cleared it
before the prologue's block was accepted; now after.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import pytest_agentbench.core.gitops as gitops
from pytest_agentbench.core.git_scripts import RACY_MARGIN_SEC
from tests.support.diff_bench import Bench, differences, tree_state
from tests.support.sandboxes import (
    WRAPPER_PID,
)

FILES: dict[str, bytes | str] = {"a.txt": "hello\n"}


def notes(bench: Bench, kind: str) -> int:
    return sum(1 for e in bench.events.emitted if e.get("type") == "note" and e["kind"] == kind)


def step_patch(bench: Bench, step: int) -> str:
    path = bench.paths.root / "diffs" / f"step_{step:04d}.patch"
    return path.read_text("utf-8") if path.exists() else ""


# --- what held ------------------------------------------------------------------------------
def test_a_command_starving_its_wrapper_of_fds_cannot_make_its_step_look_unchanged(
        docker_sandboxes: Any, tmp_path: Path) -> None:
    """A bash `x=$(...)` that cannot make its pipe sets x="" with status 0: in the after-snapshot
    UNCHANGED's find would read as "nothing changed". With the wrapper's open-files limit at 5
    (its fds 0-3 open) the wrapper's own `e=$(...)` fails first: an empty, refused output. (Other
    limits tried, not kept: nofile 6 and 7, nproc 1 and 6, fsize, as, cpu, stack: each made the
    after-snapshot fail or left it right.)"""
    bench = Bench("docker", docker_sandboxes, tmp_path, FILES)
    try:
        hostile = bench.call("run", command=f"printf 'jello\\n' > a.txt; {WRAPPER_PID}; "
                                            "prlimit --pid $w --nofile=5:5 && echo limited")
        assert hostile.stdout == "limited\n"  # prlimit reached the execute-only wrapper
        assert bench.toolbox.taken != 1 and bench.toolbox.pending == 1
        assert notes(bench, "snapshot_failed") == 1  # the empty after-snapshot, refused
        bench.run("true")  # step 1's snapshot, in an exec of its own
        assert "+jello" in step_patch(bench, 1)
        assert not differences(tree_state(bench.scored_copy()), tree_state(bench.repo))
    finally:
        bench.close()


def test_a_late_writer_is_reaped_before_its_commands_own_snapshot(
        docker_sandboxes: Any, tmp_path: Path) -> None:
    """The command times out; what it left (a session of its own, due to write
    after the exec would have ended) dies
    before the after-snapshot, which records the step as the command left it."""
    bench = Bench("docker", docker_sandboxes, tmp_path, FILES)
    try:
        assert bench.call("write_file", path="b.txt", content="b\n").ok  # step 1, pending
        late = "setsid -f bash -c 'sleep 5.5; echo late >> a.txt' >/dev/null 2>&1 </dev/null"
        result = bench.call("run", command=f"echo early >> a.txt; {late}; sleep 60",
                            timeout_sec=5)
        assert result.error_type == "TIMEOUT"
        assert bench.toolbox.taken == 2 and bench.toolbox.pending is None
        time.sleep(1.5)  # past the late writer's time
        assert (bench.repo / "a.txt").read_text() == "hello\nearly\n"
        assert "+b" in step_patch(bench, 1) and "+early" in step_patch(bench, 2)
        assert not differences(tree_state(bench.scored_copy()), tree_state(bench.repo))
    finally:
        bench.close()


# --- what was found -------------------------------------------------------------------------
def test_a_readable_shell_image_pays_no_rebuild_per_run(
        docker_sandboxes: Any, plain_shell_image: str, tmp_path: Path) -> None:
    bench = Bench("docker", docker_sandboxes, tmp_path, FILES, image=plain_shell_image)
    try:
        for i in range(3):
            bench.run(f"echo {i} >> a.txt")
        assert all(f"+{i}" in step_patch(bench, i + 1) for i in range(2))
        rebuilds = bench.toolbox.snapshots.rebuilds
        assert not differences(tree_state(bench.scored_copy()), tree_state(bench.repo))
        assert rebuilds == 0  # was 2: one per run after the first
        assert notes(bench, "snapshot_rebuilt") == 0
    finally:
        bench.close()


def test_a_large_step_diff_does_not_cost_the_next_snapshot_a_rebuild(
        docker_sandboxes: Any, tmp_path: Path) -> None:
    bench = Bench("docker", docker_sandboxes, tmp_path, FILES)
    try:
        bench.run("head -c 300000 /dev/zero | tr '\\0' 'x' | fold -w 100 > big.txt")
        # its line was too large to come back: it deferred, and the host took the step's
        # snapshot at once in an exec of its own
        assert bench.toolbox.pending is None and "big.txt" in step_patch(bench, 1)
        bench.run("echo x >> a.txt")
        assert "big.txt" in step_patch(bench, 1) and "+x" in step_patch(bench, 2)
        assert bench.toolbox.snapshots.rebuilds == 0  # was 1
        assert notes(bench, "snapshot_rebuilt") == 0
    finally:
        bench.close()


def test_a_wall_clock_step_during_an_exec_leaves_no_ref_behind(
        docker_sandboxes: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = Bench("docker", docker_sandboxes, tmp_path, FILES)
    snapshots = bench.toolbox.snapshots
    try:
        assert bench.call("write_file", path="b.txt", content="b\n").ok  # step 1, pending
        time.sleep(RACY_MARGIN_SEC + 0.3)  # so the command's own snapshot says SAME
        # the wall clock steps 5 s back while the exec runs (its mark is from before the step)
        monkeypatch.setattr(snapshots, "clock_mark", lambda: gitops._clock_offset() + 5.0)
        bench.run("true")
        assert "+b" in step_patch(bench, 1)
        assert bench.toolbox.pending == 2  # the after-snapshot's SAME was voided: the clock moved
        assert snapshots.ref == ""  # was the prologue's start, from before the step
    finally:
        bench.close()


def test_a_large_changed_file_is_left_to_a_snapshot_with_a_bound_of_its_own(
        docker_sandboxes: Any, tmp_path: Path) -> None:
    """The command's own snapshot after it does not hash a large file it wrote (git_scripts
    AFTER_BIG): the git dir untouched, the host takes the step's snapshot in an exec of its own
    (bounded), not in the next command's."""
    bench = Bench("docker", docker_sandboxes, tmp_path, FILES)
    try:
        bench.run("head -c 9000000 /dev/urandom > big.bin && echo y >> a.txt")
        # deferred, the git dir untouched; the host took the snapshot at once, in its own exec
        assert bench.toolbox.pending is None
        patch = step_patch(bench, 1)
        assert "big.bin" in patch and "a/a.txt" in patch
        assert bench.toolbox.snapshots.rebuilds == 0 and notes(bench, "snapshot_rebuilt") == 0
        assert not differences(tree_state(bench.scored_copy()), tree_state(bench.repo))
    finally:
        bench.close()


def test_a_command_with_no_snapshot_around_it_sees_no_snapshot_environment(
        docker_sandboxes: Any, plain_shell_image: str, tmp_path: Path) -> None:
    """Where no after-snapshot runs (its line would not be read) and no step is pending, the
    exec carries no script: the snapshots' environment (the wrapper hides it only from a
    command with a script around it) must not go with it either."""
    bench = Bench("docker", docker_sandboxes, tmp_path, FILES, image=plain_shell_image)
    try:
        seen = bench.run("env | grep -c '^AGENTBENCH_' || true")
        assert seen.stdout == "0\n"
    finally:
        bench.close()
