"""The watched disk limit (sandbox/disk.py DiskGuard) when others write to the same filesystem:
the free-space drop since the last walk bounds the workspace's growth from above, so it cannot
be the size the workspace had when a command started. In CI a 765 MB image load beside the test
made a 64 MiB workspace look over its limit before the command, and the command that filled it
was not flagged (test_a_watched_bound_kills_a_command_that_grows_past_it failed once)."""

from __future__ import annotations

from pathlib import Path

from pytest_agentbench.sandbox.disk import DiskGuard

MiB = 1 << 20


def test_a_neighbours_writes_do_not_hide_a_command_that_fills_the_workspace(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    guard = DiskGuard(workspace, 8, "watched")
    guard.start()  # the first command: the workspace is walked (empty)
    assert not guard.hit_after(0)
    (tmp_path / "neighbour.bin").write_bytes(b"\1" * (24 * MiB))  # same filesystem, not ours
    guard.start()  # the next command starts: the bound says up to 24 MiB may be ours
    (workspace / "big").write_bytes(b"\2" * (8 * MiB))  # the command fills the workspace
    assert guard.hit_after(153)


def test_space_a_neighbour_frees_does_not_hide_a_file_that_reached_the_size_limit(
    tmp_path: Path,
) -> None:
    """The other direction (CI, once): a neighbour deleted files while the command filled the
    workspace, so the free-space drop said the workspace had hardly grown. A command the kernel
    stopped for a file at the size limit (SIGXFSZ: exit 128+25) is walked, whatever the drop."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    neighbour = tmp_path / "neighbour.bin"
    neighbour.write_bytes(b"\1" * (16 * MiB))
    guard = DiskGuard(workspace, 8, "watched")
    guard.start()
    assert not guard.hit_after(0)
    guard.start()
    (workspace / "big").write_bytes(b"\2" * (8 * MiB))  # the command fills the workspace ...
    neighbour.unlink()  # ... while a neighbour frees twice as much
    assert guard.hit_after(128 + 25)
    guard.start()
    assert not guard.hit_after(0)  # the next command adds nothing: not a new hit
