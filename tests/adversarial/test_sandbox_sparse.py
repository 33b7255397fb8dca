"""Issue 20 item 5: sparse files, apparent sizes, copy-back bounds, archive engines' disk bound.

Before the fix the environment cache counted allocated blocks while archive transfer ships
apparent sizes: a 128 KiB entry became 2 GiB of real data in each sandbox's volume. With a kept
workspace on an archive engine, sparse files made the copy-back refuse and the agent's own
failure became SANDBOX_ERROR after a 60 s stall; copy-back had no bound on member count; and
the workspace disk limit was not enforced on archive engines at all (`"enforced": "none"`).

The archive path is the local engine reached as a remote one (`transfer="archive"`: volumes
filled and read back through the archive API, as tests/contract does).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.core.envcache import EnvCache
from pytest_agentbench.paths.trees import tree_size
from pytest_agentbench.sandbox.port import SandboxError, SandboxSpec
from tests.support.sandboxes import MakeSandbox, open_labelled
from tests.support.scripted_runs import run_agent

MiB = 1 << 20
GiB = 1 << 30
INCOMPLETE_NOTE = "AGENTBENCH-INCOMPLETE.txt"  # archives.INCOMPLETE_NOTE


def sparse(path: Path, size: int) -> Path:
    with path.open("wb") as handle:
        handle.write(b"x" * 4096)
        handle.truncate(size)
    return path


def test_tree_size_and_the_env_cache_count_a_sparse_file_at_its_apparent_size(
    tmp_path: Path,
) -> None:
    """Issue 20 item 5: 2 GiB apparent, a few KiB allocated, counts as 2 GiB (it ships as 2 GiB)."""
    repo, env = tmp_path / "repo", tmp_path / "env"
    repo.mkdir()
    env.mkdir()
    blob = sparse(env / "planted.bin", 2 * GiB)
    assert blob.stat().st_blocks * 512 < MiB  # really sparse here
    assert tree_size(env)[0] >= 2 * GiB
    cache = EnvCache(tmp_path / "cache", max_bytes=GiB)
    claim = cache.claim("k" * 16, wait_sec=0)
    hold, why = cache.publish(claim, "k" * 16, repo, env, [], {})
    assert hold is None and why is not None and "larger than the cache cap" in why
    claim.release()


@pytest.fixture
def archive_sandboxes(docker_sandboxes: Any) -> Iterator[Any]:
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    factory = DockerSandboxFactory(docker_sandboxes.client, transfer="archive")
    yield factory
    factory.close_all()


@pytest.fixture
def make_archive_sandbox(archive_sandboxes: Any, sandbox_spec: SandboxSpec
                         ) -> Iterator[MakeSandbox]:
    with open_labelled(archive_sandboxes, sandbox_spec) as make:
        yield make


def test_shipping_a_sparse_file_to_an_archive_engine_is_refused(
    make_archive_sandbox: MakeSandbox, sandbox_spec: SandboxSpec,
) -> None:
    """Issue 20 item 5: a 2 GiB sparse file in /env (or a workspace over its limit) is refused
    with the reason before anything is written into a volume, instead of 2 GiB of zeros."""
    sandbox_spec.env_dir.mkdir()
    sparse(sandbox_spec.env_dir / "planted.pth.bin", 2 * GiB)
    started = time.monotonic()
    with pytest.raises(SandboxError) as refused:
        make_archive_sandbox()
    assert time.monotonic() - started < 20
    assert "planted.pth.bin" in str(refused.value) and "sparse" in str(refused.value)
    (sandbox_spec.env_dir / "planted.pth.bin").unlink()
    sparse(sandbox_spec.workspace / "big.bin", 100 * MiB)
    with pytest.raises(SandboxError) as over:
        make_archive_sandbox(disk_limit_mb=64)
    assert "64 MiB" in str(over.value)


def test_archive_engines_bound_the_workspace(make_archive_sandbox: MakeSandbox) -> None:
    """Issue 20 item 5: the disk limit is enforced on archive engines (it said "none")."""
    sandbox = make_archive_sandbox(disk_limit_mb=64)
    assert sandbox.facts()["disk_limit"]["enforced"] not in ("none", None)
    one_file = sandbox.exec("head -c 200M /dev/zero > big", timeout_sec=60)
    assert one_file.disk_limit_exceeded and not one_file.ok
    assert sandbox.exec("rm -f big", timeout_sec=30).ok
    holes = sandbox.exec("for i in 1 2 3 4; do truncate -s 60M s$i; done", timeout_sec=30)
    assert holes.disk_limit_exceeded, holes  # 240 MiB apparent: what copy-back would ship
    assert "disk limit of 64 MiB" in holes.stderr
    assert sandbox.exec("rm -f s*", timeout_sec=30).ok
    started = time.monotonic()
    flood = sandbox.exec("i=0; while :; do head -c 4M /dev/zero > f$i; i=$((i+1)); done",
                         timeout_sec=120)
    assert time.monotonic() - started < 60
    assert flood.disk_limit_exceeded and not flood.ok and not flood.timed_out
    small = sandbox.exec("rm -f f* && echo ok > a.txt", timeout_sec=30)
    assert small.ok and not small.disk_limit_exceeded


def test_copy_back_of_a_kept_workspace_is_bounded_in_members(
    make_archive_sandbox: MakeSandbox, sandbox_spec: SandboxSpec,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 20 item 5: copy-back stops at a member bound (200,000 empty files took 24 s); for
    an agent's kept workspace that is a marked, incomplete copy, never an error."""
    import pytest_agentbench.sandbox.archives as archives

    monkeypatch.setattr(archives, "MAX_MEMBERS", 500, raising=False)
    labels = {**sandbox_spec.labels, "agentbench.phase": "agent"}
    sandbox = make_archive_sandbox(labels=labels, disk_limit_mb=64)
    assert sandbox.exec("mkdir d && cd d && touch $(seq 1 2000) && echo hi > ../a.txt",
                        timeout_sec=60).ok
    sandbox.close()  # must not raise
    members = sum(1 for _ in sandbox_spec.workspace.rglob("*"))
    assert members <= 502
    note = sandbox_spec.workspace / INCOMPLETE_NOTE
    assert note.is_file() and "500" in note.read_text()


def test_sparse_files_in_a_kept_workspace_keep_the_agents_outcome(tmp_path: Path) -> None:
    """Issue 20 item 5 end to end: an agent that leaves sparse files over the limit and does not
    fix the bug on an archive engine with --agentbench-keep-workspace fails TESTS_FAILED (it
    was SANDBOX_ERROR, exit 10, after a 60 s stall); the kept copy is marked incomplete."""
    calls = [{"tool": "run", "arguments": {
        "command": "for i in 1 2 3 4 5 6; do truncate -s 60M sparse$i.bin; done"}}]
    started = time.monotonic()
    record, task_dir = run_agent(tmp_path, calls, "--agentbench-keep-workspace",
                                 "--agentbench-engine=default,transfer=archive",
                                 disk_limit_mb=256)
    took = time.monotonic() - started
    assert record["result"]["failure_reason"] == "TESTS_FAILED", record["result"]
    assert took < 90, took
    # the files were hashed once, by the final diff: the run's own snapshot after it left them
    # to a snapshot with a bound of its own (hashing them there, cut short by the disk limit,
    # cost a rebuild and twice the hashing, and once under load the final diff's time limit)
    events = (task_dir.parent.parent / "events.jsonl").read_text()
    assert '"snapshot_rebuilt"' not in events
    environment = json.loads((task_dir / "meta" / "environment.json").read_text())
    assert (task_dir / "repo" / INCOMPLETE_NOTE).is_file(), environment["kept_workspace"]
