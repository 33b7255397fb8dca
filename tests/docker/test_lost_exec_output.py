"""A short exec's output can arrive empty. CI once lost the output of a snapshot's first script,
and the attempt ended SANDBOX_ERROR ("cannot start a snapshot (exit 0, ... 1 lines)"). The usual
cause was docker-py's (it read past the bytes that came with the engine's answer,
docker/docker-py#3332); sandbox/docker/exec_stream.py reads them, and test_exec_stream_docker.py
proves it over a link that delivers them so. An engine may still drop a stream (moby/moby#27289):
the sandbox tells such a result apart (`output_lost`: no trailer, yet the wrapper was not
killed), says so in stderr, and the harness's repeatable scripts (snapshots, file reads) run once
more. The fault is made here on the real engine: the exec's real stream is read to its end and
thrown away."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.core.gitops import Snapshotter
from tests.support.sandboxes import open_labelled, small_spec


class Emptied:
    """A command's stream read to its end (the command ran) and handed on with nothing in it."""

    def __init__(self, real: Any) -> None:
        for _ in real.frames():
            pass
        real.close()

    def frames(self) -> Iterator[tuple[int, bytes]]:
        return iter(())

    def close(self) -> None:
        pass


class DropStreams:
    """Wraps a sandbox's stream opener: the next `drops` commands' streams arrive empty (the
    sandbox's own one-shot checks, such as the image's shell, read theirs apart)."""

    def __init__(self, sandbox: Any) -> None:
        self.real, self.drops, self.dropped = sandbox._open_stream, 0, 0

    def __call__(self, exec_id: str) -> Any:
        stream = self.real(exec_id)
        if self.drops <= 0:
            return stream
        self.drops -= 1
        self.dropped += 1
        return Emptied(stream)


@pytest.fixture(params=["bind", "archive"])
def lossy(request: Any, docker_sandboxes: Any, tmp_path: Path) -> Iterator[tuple[Any, DropStreams]]:
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    factory = DockerSandboxFactory(docker_sandboxes.client, transfer=request.param)
    spec = small_spec(tmp_path)
    (spec.workspace / "a.py").write_text("A = 1\n")
    git = ["git", "-C", str(spec.workspace), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    os.chmod(spec.workspace, 0o777)  # the sandbox user writes here (bind mode)
    with open_labelled(factory, spec) as make:
        sandbox = make()
        # one-shot execs: the fault is an exec's that ends; a held shell's stream does not end
        # with its command (tests/docker/test_held_shell.py: one that ended before a request)
        sandbox.hold_shell = False
        dropper = DropStreams(sandbox)
        sandbox._open_stream = dropper
        yield sandbox, dropper


def test_a_command_whose_output_was_lost_says_so(lossy: Any) -> None:
    sandbox, dropper = lossy
    dropper.drops = 1
    result = sandbox.exec("echo hello; exit 3", timeout_sec=30)
    assert dropper.dropped == 1
    assert result.output_lost and result.exit_code == 3 and result.stdout == ""
    assert "delivered none of this command's output" in result.stderr
    again = sandbox.exec("echo hello; exit 3", timeout_sec=30)
    assert not again.output_lost and again.stdout == "hello\n" and again.exit_code == 3


def test_a_killed_wrapper_is_not_taken_for_a_lost_output(lossy: Any) -> None:
    sandbox, _ = lossy
    result = sandbox.exec("sleep 30", timeout_sec=1)
    assert result.timed_out and not result.output_lost


def test_snapshots_and_file_reads_run_again_when_the_output_was_lost(lossy: Any) -> None:
    sandbox, dropper = lossy
    snaps = Snapshotter(sandbox)
    dropper.drops = 1  # the snapshot's first script (the CI failure)
    first = snaps.snapshot()
    dropper.drops = 1  # a later snapshot and diff
    sandbox.exec("echo 'A = 2' > a.py", timeout_sec=30)
    second, stat = snaps.snapshot_diff(first)
    assert second != first and dropper.dropped == 2
    assert "a.py" in str(stat)
    dropper.drops = 1
    assert sandbox.files.read_bytes("a.py") == b"A = 2\n"
