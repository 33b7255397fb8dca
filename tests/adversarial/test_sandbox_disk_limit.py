"""Issue 8 item 8a: the workspace has a size limit, enforced.

On 4a9ba26 nothing bounded the workspace: 1.5 GB written into .git/ landed on the host disk.
Now `provision` turns the workspace into a loop-mounted ext4 of the limit's size where the host
allows it (a hard bound: ENOSPC), and a sandbox on a workspace that is not one watches its size
and kills a command that grows it past the limit (a soft bound). Either way the ExecResult says
`disk_limit_exceeded` and stderr says why.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support import sandboxes
from tests.support.sandboxes import MakeSandbox

MiB = 1 << 20


def allocated(path: Path) -> int:
    return sum(p.lstat().st_blocks * 512 for p in path.rglob("*")) if path.is_dir() else 0


@pytest.fixture
def bounded(docker_sandboxes: Any, tmp_path: Path) -> Any:
    problem = docker_sandboxes.loopfs_problem()
    if problem is not None:
        pytest.skip(f"no filesystem bound on this host: {problem}")
    workspace = tmp_path / "bounded"
    assert docker_sandboxes.provision(workspace, 32) == "filesystem"
    yield workspace
    docker_sandboxes.release(workspace)


def test_a_filesystem_bound_stops_writes_into_git(make_docker_sandbox: MakeSandbox,
                                                  docker_sandboxes: Any, bounded: Path) -> None:
    sandbox = make_docker_sandbox(workspace=bounded, disk_limit_mb=32)
    assert sandbox.exec("git init -q . && echo hi > a.txt", timeout_sec=30).ok
    flood = sandbox.exec("dd if=/dev/zero of=.git/blob bs=1M count=100", timeout_sec=60)
    assert not flood.ok and flood.disk_limit_exceeded
    assert "disk limit of 32 MiB" in flood.stderr and "No space left" in flood.stderr
    image = next(bounded.parent.glob(".agentbench-disk-*"))
    assert image.stat().st_blocks * 512 < 40 * MiB  # what reached the host disk
    assert sandbox.facts()["disk_limit"]["enforced"] == "filesystem"
    assert sandbox.files.read_bytes("a.txt") == b"hi\n"  # the host-side tools still see it
    assert sandbox.exec("rm .git/blob && echo ok > b.txt", timeout_sec=30).ok
    after = sandbox.exec("ls", timeout_sec=30)
    assert after.ok and not after.disk_limit_exceeded
    sandbox.close()
    docker_sandboxes.release(bounded)
    assert not os.path.ismount(bounded) and not image.exists() and not any(bounded.iterdir())


def test_release_can_keep_the_content(make_docker_sandbox: MakeSandbox, docker_sandboxes: Any,
                                      bounded: Path) -> None:
    sandbox = make_docker_sandbox(workspace=bounded, disk_limit_mb=32)
    assert sandbox.exec("mkdir -p d && echo kept > d/f && ln -s d/f link", timeout_sec=30).ok
    sandbox.close()
    docker_sandboxes.release(bounded, keep=True)
    assert not os.path.ismount(bounded)
    assert (bounded / "d" / "f").read_text() == "kept\n" and (bounded / "link").is_symlink()


PROVISION_AND_DIE = """
import os, sys
from pathlib import Path
from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory
print(DockerSandboxFactory().provision(Path(sys.argv[1]), 16), flush=True)
os.kill(os.getpid(), 9)
"""


def test_mounts_of_a_crashed_process_or_a_removed_attempt_are_released(
    docker_sandboxes: Any, tmp_path: Path,
) -> None:
    if docker_sandboxes.loopfs_problem() is not None:
        pytest.skip(docker_sandboxes.loopfs_problem())
    crashed = tmp_path / "crashed"
    proc = subprocess.run([sys.executable, "-c", PROVISION_AND_DIE, str(crashed)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL and proc.stdout == "filesystem\n"
    assert os.path.ismount(crashed)
    removed = tmp_path / "removed"
    assert docker_sandboxes.provision(removed, 16) == "filesystem"
    assert not os.path.ismount(crashed)  # every provision releases the stale ones first
    for image in tmp_path.glob(".agentbench-disk-*removed.img"):
        image.unlink()  # what the core's rmtree of the attempt directory does
    import pytest_agentbench.sandbox.disk as disk

    assert disk.release_stale() >= 1
    assert not os.path.ismount(removed)
    assert not list(tmp_path.glob(".agentbench-disk-*"))


@pytest.fixture
def watched_factory() -> Any:
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    factory = DockerSandboxFactory()
    factory._loopfs_problem = "forced by the test (as for a harness that is not root)"
    yield factory
    factory.close_all()


def test_a_watched_bound_kills_a_command_that_grows_past_it(
    watched_factory: Any, sandbox_spec: Any,
) -> None:
    limit = 64
    labels = {sandboxes.SESSION_LABEL: sandboxes.SESSION_ID}
    spec = replace(sandbox_spec, disk_limit_mb=limit, labels=labels)
    sandbox = watched_factory.open(spec)
    one_file = sandbox.exec("head -c 200M /dev/zero > big", timeout_sec=60)
    assert one_file.disk_limit_exceeded and (spec.workspace / "big").stat().st_size == limit * MiB
    assert sandbox.exec("rm big", timeout_sec=30).ok  # over the limit, shrinking is fine
    start = time.monotonic()
    flood = sandbox.exec("i=0; while :; do head -c 4M /dev/zero > f$i; i=$((i+1)); done",
                         timeout_sec=120)
    assert time.monotonic() - start < 60
    assert flood.disk_limit_exceeded and not flood.ok and not flood.timed_out
    assert "disk limit of 64 MiB (the command was killed)" in flood.stderr
    overshoot = allocated(spec.workspace) - limit * MiB
    print(f"watched overshoot: {overshoot / MiB:.0f} MiB")
    assert overshoot < 1024 * MiB
    assert sandbox.facts()["disk_limit"]["enforced"] == "watched"
    assert "forced by the test" in sandbox.facts()["disk_limit"]["filesystem_unavailable"]
