"""Issue 8 items 4 and 5 against a real Docker sandbox: the agent works through `run` in the
container, the harness (root on the host here) reads the bind-mounted workspace.

Item 4: a FIFO made with `mkfifo` in the container blocked the host's `read_file`, `write_file`
and `search` in open(). Item 5: a `.git` replaced by a `gitdir:` file and a planted bare
repository, both with a `core.fsmonitor`, survived into the kept workspace. Each tool call runs in
a thread with a bound; a call that hangs on a FIFO is released by opening the FIFO's other end.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.tools.toolbox import Toolbox, ToolPolicy, ToolResult
from tests.support.sandboxes import open_labelled, small_spec


@pytest.fixture
def sandbox(docker_sandboxes: Any, tmp_path: Path) -> Iterator[Any]:
    spec = small_spec(tmp_path, mem_limit_mb=1024, pids_limit=128)
    (spec.workspace / "app.py").write_text("needle = 1\n")
    with open_labelled(docker_sandboxes, spec) as make:
        yield make()


def in_time(fn: Callable[[], ToolResult], fifos: list[Path], seconds: float = 15) -> ToolResult:
    out: list[ToolResult] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for fifo in fifos:  # release the blocked open() so the thread can end
            fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
            os.close(fd)
        thread.join(5)
        pytest.fail(f"hung: the tool call did not return within {seconds:g}s", pytrace=False)
    return out[0]


def test_item4_fifos_made_in_the_container_never_block_the_host(sandbox: Any) -> None:
    tb = Toolbox(sandbox, ToolPolicy(tool_timeout_sec=30))
    made = tb.call("run", {"command": "mkfifo p && mkdir -p src && mkfifo src/q.py && "
                                      "python3 -c \"print('a' * 80 + '!')\" > bomb.txt"})
    assert made.ok and made.exit_code == 0, made.stderr
    ws = sandbox.spec.workspace
    fifos = [ws / "p", ws / "src" / "q.py"]
    read = in_time(lambda: tb.call("read_file", {"path": "p"}), fifos)
    assert read.error_type == "INVALID_ARGUMENTS" and "FIFO" in (read.error_message or "")
    wrote = in_time(lambda: tb.call("write_file", {"path": "p", "content": "x"}), fifos)
    assert wrote.error_type == "INVALID_ARGUMENTS"
    found = in_time(lambda: tb.call("search", {"query": "needle"}), fifos)
    assert [m["path"] for m in found.data["matches"]] == ["app.py"]
    slow = in_time(lambda: tb.call("search", {"query": "(a|aa)+$", "regex": True}), fifos, 60)
    assert slow.error_type == "TIMEOUT"
    removed = in_time(lambda: tb.call("remove_file", {"path": "p"}), fifos)
    assert removed.ok and not os.path.lexists(ws / "p")


def test_item5_a_workspace_poisoned_in_the_container_is_kept_inert(sandbox: Any,
                                                                   tmp_path: Path) -> None:
    from pytest_agentbench.core.keep import keep_workspace

    marker = tmp_path / "FSMONITOR_RAN"
    hook = f"touch {marker}; false #"
    script = " && ".join([
        "git init -q . && git init -q own && git init -q --bare docs/evil",
        f"git -C own config core.fsmonitor '{hook}'",
        f"git -C docs/evil config core.fsmonitor '{hook}'",
        "git -C docs/evil config core.bare false && git -C docs/evil config core.worktree ..",
        "rm -rf .git && echo 'gitdir: own/.git' > .git",
        "mkfifo pipe && ln -s /etc/shadow shadow",
    ])
    made = Toolbox(sandbox, ToolPolicy(tool_timeout_sec=60)).call("run", {"command": script})
    assert made.exit_code == 0, made.stderr
    sandbox.close()
    dest = tmp_path / "kept" / "repo"
    report = keep_workspace(sandbox.spec.workspace, dest)
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    for directory in [dest, *[p for p in dest.rglob("*") if p.is_dir()]]:
        found = subprocess.run(["git", "rev-parse", "--git-dir"], cwd=directory, env=env,
                               capture_output=True, text=True, check=False)
        assert found.returncode != 0, (directory, found.stdout)
        subprocess.run(["git", "status"], cwd=directory, env=env, capture_output=True,
                       check=False)
    assert not marker.exists()
    skipped = {s["path"] for s in report.skipped}
    assert {".git", "own/.git", "docs/evil/HEAD", "pipe", "shadow"} <= skipped
    assert (dest / "app.py").read_text() == "needle = 1\n"
