"""Red-team review of the wrapper's EPILOGUE (c6d6d5c, a11ae60) and the trailer's exit status
(d44feb9): what a hostile baseline command (task code) can do to the lines that carry the
epilogue's output, a results file and the status, and to the harness git dir that run 1's
epilogue creates before run 2's command runs.

Held (plain tests): under the runner image's execute-only shell, run 2's command planting a
forged object under the base tree's id (in the git dir's object store or in `$GD.prev`, which
the first snapshot's rebuild reads as an alternate) or swapping the git dir for a symlink does not
change the base tree: it is the one a snapshot of its own takes.

Found, and fixed with these tests (each failed before): on an image without the execute-only
shell the command reads the wrapper's nonce from /proc/<wrapper>/environ, prints a forged
epilogue (or results-file) line and a forged trailer, and kills the wrapper: the host refused the
forged status since d44feb9, yet took the forged epilogue output and file content; now those
lines are read only when the trailer is trusted. And the private shell was believed from the
image's label alone: a label naming a readable bash made a forged 0 the exit status; now the
label's shell is checked once per image (root's, neither readable nor writable by the command
user) before it is trusted.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.core.gitops import START_SCRIPT, Snapshotter
from tests.support.sandboxes import (
    STEAL_NONCE,
    MakeSandbox,
    open_labelled,
    runner_image_labelled,
    small_spec,
)

FORGED = "forged\n"
FORGED_B64 = base64.b64encode(FORGED.encode()).decode()


def _line(mark: str, value: str) -> str:
    return f"printf '\\n\\036agentbench-{mark}:%s {value}\\n' \"$n\" >&2"


@pytest.fixture(scope="module")
def readable_shell_image(docker_sandboxes: Any) -> Iterator[str]:
    """An image whose label names a shell that is not execute-only (a readable bash)."""
    yield from runner_image_labelled(docker_sandboxes, "/bin/bash",
                                     "epilogue-readable-shell")


def test_a_stolen_nonce_forges_no_epilogue_output(make_docker_sandbox: MakeSandbox,
                                                  plain_shell_image: str) -> None:
    sandbox = make_docker_sandbox(image=plain_shell_image)
    command = (f'{STEAL_NONCE}; [ -n "$n" ] && echo stolen; {_line("epilogue", "+" + FORGED_B64)};'
               f' {_line("end", "1 0 0 -")}; kill -9 $w; exit 1')
    result = sandbox.exec(command, timeout_sec=30, epilogue="echo real")
    assert "stolen" in result.stdout  # the attack had the real nonce
    assert result.exit_code == 137  # the status is the engine's (d44feb9 holds) ...
    assert result.epilogue_output != FORGED  # ... but the epilogue's output is the forger's


def test_a_stolen_nonce_forges_no_results_file(make_docker_sandbox: MakeSandbox,
                                               plain_shell_image: str) -> None:
    sandbox = make_docker_sandbox(image=plain_shell_image)
    command = (f'{STEAL_NONCE}; echo real > /tmp/r.xml; {_line("file", "+" + FORGED_B64)}; '
               f'{_line("end", "1 0 0 -")}; kill -9 $w; exit 1')
    result = sandbox.exec(command, timeout_sec=30, collect_file="/tmp/r.xml")
    assert not (result.file_read and result.file_content == FORGED.encode())


def test_a_label_naming_a_readable_shell_forges_no_status(make_docker_sandbox: MakeSandbox,
                                                          readable_shell_image: str) -> None:
    sandbox = make_docker_sandbox(image=readable_shell_image)
    command = f'{STEAL_NONCE}; {_line("end", "0 0 0 -")}; kill -9 $w; exit 1'
    result = sandbox.exec(command, timeout_sec=30)
    assert result.exit_code != 0 and not result.ok


# -- held: run 2's command cannot change the base tree through the git dir run 1 started --------
@pytest.fixture()
def repo_sandbox(docker_sandboxes: Any, tmp_path: Path) -> Iterator[tuple[Any, Path, str, str]]:
    spec = small_spec(tmp_path)
    ws = spec.workspace
    (ws / "a.py").write_text("A = 1\n")
    (ws / ".gitignore").write_text("*.log\n")
    git = ["git", "-C", str(ws), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    ws.chmod(0o777)
    real, loose = _forged_head_tree(ws)  # before the open gives the copy to the sandbox user
    with open_labelled(docker_sandboxes, spec) as make:
        yield make(), ws, real, loose


def _forged_head_tree(ws: Path) -> tuple[str, str]:
    """(HEAD's tree id, base64 of a loose object holding another tree: HEAD's plus run.log, a
    file the ignore rules hide) — planted under HEAD's id, it would put run.log in the base."""
    git = ["git", "-C", str(ws)]
    real = subprocess.run([*git, "rev-parse", "HEAD^{tree}"], check=True, capture_output=True,
                          text=True).stdout.strip()
    listing = subprocess.run([*git, "ls-tree", real], check=True, capture_output=True,
                             text=True).stdout
    blob = subprocess.run([*git, "hash-object", "-w", "--stdin"], input="planted\n", check=True,
                          capture_output=True, text=True).stdout.strip()
    forged = subprocess.run([*git, "mktree"], input=listing + f"100644 blob {blob}\trun.log\n",
                            check=True, capture_output=True, text=True).stdout.strip()
    loose = ws / ".git" / "objects" / forged[:2] / forged[2:]
    return real, base64.b64encode(loose.read_bytes()).decode()


@pytest.mark.parametrize("where", ["prev", "objects", "symlink"])
def test_run_two_tampering_with_the_started_git_dir_leaves_the_base_tree(
        repo_sandbox: tuple[Any, Path, str, str], where: str) -> None:
    sandbox, ws, real, loose = repo_sandbox
    snapshots = Snapshotter(sandbox)
    first = sandbox.exec("echo x > run.log", timeout_sec=30, epilogue=START_SCRIPT)
    snapshots.started = first.epilogue_output
    script, env = snapshots.first_script() or ("", {})
    assert script and snapshots.gitdir
    gd = snapshots.gitdir
    plant = {
        "prev": f"d={gd}.prev/{real[:2]}",
        "objects": f"d={gd}/objects/{real[:2]}",
        "symlink": f"mkdir -p /tmp/evil && rm -rf {gd} && ln -s /tmp/evil {gd} && "
                   f"d=/tmp/evil/objects/{real[:2]}",
    }[where]
    tamper = (f"{plant} && mkdir -p $d && echo {loose} | base64 -d > $d/{real[2:]} && "
              f"printf '[core]\\n\\tfsmonitor = touch /workspace/pwned\\n' > {gd}/config && "
              "echo planted")
    second = sandbox.exec(tamper, timeout_sec=30, epilogue=script, env=env)
    assert "planted" in second.stdout
    if not snapshots.accept_first(second.epilogue_output):
        snapshots.snapshot()  # the fallback: execs of its own
    own = Snapshotter(sandbox).snapshot()
    assert snapshots.base == own
    listed = sandbox.exec(f"git ls-tree -r --name-only {own}", timeout_sec=30,
                          env={"GIT_OBJECT_DIRECTORY": f"{snapshots.gitdir}/objects"}).stdout
    assert listed.split() == [".gitignore", "a.py"]  # run.log stays out
    assert not (ws / "pwned").exists()
