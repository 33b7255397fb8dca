"""An exec's output over a link that hands the engine's answer and the command's output on in
one piece (tests/support/slow_link.py; an ssh channel or a loaded host does the same): docker-py
reads past what came with the answer (docker/docker-py#3332), and CI lost `seq 3`'s output so
over the ssh engine. sandbox/docker/exec_stream.py reads it all: its plain form, a command of the
Docker sandbox with its trailer and prologue block, and a channel held open. A channel also
outlives the client's timeout while its process is silent (a model relay waiting on a slow
model)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from pytest_agentbench.sandbox.docker import exec_stream
from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE
from pytest_agentbench.sandbox.port import PROLOGUE_MARK
from tests.support.sandboxes import open_labelled, small_spec
from tests.support.slow_link import SlowLink

ROUNDS = 8


@pytest.fixture
def link(docker_sandboxes: Any) -> Iterator[SlowLink]:
    slow = SlowLink()
    yield slow
    slow.close()


@pytest.fixture
def container(link: SlowLink) -> Iterator[tuple[docker.DockerClient, Any]]:
    client = docker.DockerClient(base_url=link.url, timeout=30)
    box = client.containers.run(DEFAULT_IMAGE, ["sleep", "120"], detach=True,
                                labels={"agentbench": "1", "agentbench.test": "exec-stream"})
    try:
        yield client, box
    finally:
        box.remove(force=True)
        client.close()


def test_a_fast_commands_output_that_came_with_the_answer_is_read(
        link: SlowLink, container: tuple[docker.DockerClient, Any]) -> None:
    client, box = container
    outputs = [exec_stream.output(client.api, client.api.exec_create(
        box.id, ["sh", "-c", "seq 3; echo err >&2"])["Id"]) for _ in range(ROUNDS)]
    either = {b"1\n2\n3\nerr\n", b"err\n1\n2\n3\n"}  # two pipes: no order between them
    assert all(output in either for output in outputs), outputs
    # the link did deliver them together: the answer's head and the output in one write
    assert any(b"101 UPGRADED" in chunk and b"1\n2\n3\n" in chunk for chunk in link.chunks)


def test_the_sandboxs_commands_keep_their_output_trailer_and_prologue(
        link: SlowLink, tmp_path: Path) -> None:
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    client = docker.DockerClient(base_url=link.url, timeout=30)
    factory = DockerSandboxFactory(client)
    try:
        with open_labelled(factory, small_spec(tmp_path)) as make:
            sandbox = make()
            for _ in range(ROUNDS // 2):
                result = sandbox.exec("seq 3; exit 4", timeout_sec=30)
                assert (result.stdout, result.exit_code, result.output_lost) == (
                    "1\n2\n3\n", 4, False)
            fast = sandbox.exec("true", timeout_sec=30, prologue="printf 'a\\nb\\nc\\nEND\\n'",
                                inline_scripts=True)
            assert fast.stdout.startswith(PROLOGUE_MARK) and fast.stdout.endswith(
                "\na\nb\nc\nEND\n"), fast.stdout
    finally:
        factory.close_all()
        client.close()


def test_a_channel_gets_its_first_bytes_and_outlives_the_clients_timeout(
        link: SlowLink, docker_sandboxes: Any, tmp_path: Path) -> None:
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    client = docker.DockerClient(base_url=link.url, timeout=2)
    factory = DockerSandboxFactory(client)
    try:
        with open_labelled(factory, small_spec(tmp_path)) as make:
            sandbox = make()
            quick = sandbox.attach(["sh", "-c", "printf first; echo oops >&2"])
            assert _read_all(quick) == b"first" and quick.stderr_tail() == "oops\n"
            quick.close()
            silent = sandbox.attach(["sh", "-c", "read line; sleep 3; echo \"got $line\""])
            silent.sendall(b"ping\n")
            started = time.monotonic()
            assert _read_all(silent) == b"got ping\n"  # 3 s of silence past a 2 s timeout
            assert time.monotonic() - started >= 3
            silent.close()
            with pytest.raises(OSError):
                silent.sendall(b"more\n")
    finally:
        factory.close_all()
        client.close()


def _read_all(channel: Any) -> bytes:
    data = b""
    while chunk := channel.recv(4096):
        data += chunk
    return data
