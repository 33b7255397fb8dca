"""The agent's snapshots started and its base tree taken after the baseline's own commands, in
their execs (core/before_agent.py, gitops.Snapshotter.first_script / accept_first, the wrapper's
EPILOGUE): the same base tree as a snapshot of its own, with the ignore rules as they stood; and
an output that is not a whole snapshot falls back to execs of its own, with the same result."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.core.gitops import START_SCRIPT, Snapshotter
from tests.support.sandboxes import open_labelled, small_spec


@pytest.fixture()
def sandbox(docker_sandboxes: Any, tmp_path: Path) -> Iterator[Any]:
    spec = small_spec(tmp_path)
    (spec.workspace / "a.py").write_text("A = 1\n")
    (spec.workspace / ".gitignore").write_text("*.log\n")
    git = ["git", "-C", str(spec.workspace), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    os.chmod(spec.workspace, 0o777)
    with open_labelled(docker_sandboxes, spec) as make:
        yield make()


def baseline_like(sandbox: Any, snapshots: Snapshotter) -> None:
    """Two baseline runs: each writes files, the ignore rules start after the first and the
    base tree is taken after the second, as core/before_agent.py does."""
    first = sandbox.exec("echo run1 > out.txt; echo x > run.log", timeout_sec=30,
                         epilogue=START_SCRIPT)
    snapshots.started = first.epilogue_output
    script, env = snapshots.first_script() or ("", {})
    assert script, "the start's output was whole"
    second = sandbox.exec("echo run2 > out.txt; (sleep 0.3; echo late > late.txt) & disown",
                          timeout_sec=30, epilogue=script, env=env)
    assert "AGENTBENCH_EXCL" not in second.stdout
    assert snapshots.accept_first(second.epilogue_output)


def test_the_base_tree_is_the_one_a_snapshot_of_its_own_takes(sandbox: Any) -> None:
    early = Snapshotter(sandbox)
    baseline_like(sandbox, early)
    own = Snapshotter(sandbox).snapshot()
    assert early.base == early.tree == own
    # the ignore rules held (run.log is not in it), what the run left is, the late write not
    listed = sandbox.exec(f"git ls-tree -r --name-only {own}", timeout_sec=30,
                          env={"GIT_OBJECT_DIRECTORY": f"{early.gitdir}/objects"}).stdout
    assert listed.split() == [".gitignore", "a.py", "out.txt"]
    # and the next snapshot from it sees the agent's change, as from any base
    sandbox.exec("echo B = 2 >> a.py", timeout_sec=30)
    tree, diff = early.snapshot_diff(early.base)
    assert diff.files == ["a.py"] and tree != own


@pytest.mark.parametrize("output", [None, "", "not a snapshot\n", "0" * 40 + "\n\n\nEND\n"])
def test_an_output_that_is_not_a_whole_snapshot_falls_back(sandbox: Any, output: Any) -> None:
    snapshots = Snapshotter(sandbox)
    first = sandbox.exec("true", timeout_sec=30, epilogue=START_SCRIPT)
    snapshots.started = first.epilogue_output
    assert snapshots.first_script() is not None
    assert not snapshots.accept_first(output)
    assert snapshots.gitdir is None and not snapshots.base
    assert snapshots.snapshot() == Snapshotter(sandbox).snapshot()  # execs of its own


def test_a_start_that_did_not_come_back_gives_no_script(sandbox: Any) -> None:
    snapshots = Snapshotter(sandbox)
    snapshots.started = None
    assert snapshots.first_script() is None
    snapshots.started = "garbage\n/tmp/x\n"
    assert snapshots.first_script() is None
    assert snapshots.snapshot()  # starts in an exec of its own
