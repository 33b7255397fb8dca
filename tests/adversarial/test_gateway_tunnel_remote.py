"""Issue 23 item 2, the remote transport under attack: on the tests' second engine (transfer
archive) a process held open by an exec, as the model relay is (DockerSandbox.attach, the
container's own user), speaks to the host pump (gateway/tunnel.py) in front of a real model
gateway on a Unix socket. Instead of the relay it is a hostile program: its frames name another
destination (the engine's Docker socket, a canary socket of this host), claim a gigabyte,
carry raw HTTP, or use a stream never opened. Each closes the whole transport (the process's
stdin ends and it exits: fail closed), the reason is recorded, and nothing reaches the canary
or the model. Well-formed streams reach the gateway only, which refuses non-model paths and
other tokens as it does over the local relay."""

from __future__ import annotations

import shutil
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from pytest_agentbench.agents.llm_config import Budget
from pytest_agentbench.core.event_sink import EventSink
from pytest_agentbench.gateway import ModelGateway
from pytest_agentbench.gateway.tunnel import TunnelPump
from pytest_agentbench.gateway.tunnel_relay import DATA, EOF, OPEN, READY, encode
from pytest_agentbench.llm import resolve_model_config
from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.sandboxes import open_labelled, small_spec

pytestmark = pytest.mark.xdist_group("second_engine")
KEY = "sk-test-TUNNELKEY0123456789abcdef"

# The hostile relay: READY, then the frames given in hex as its argument, then it echoes to
# stderr what the host sends and exits when its stdin ends.
HOSTILE = r'''
import os, sys
os.write(1, bytes.fromhex(sys.argv[1]))
got = b""
while chunk := os.read(0, 65536):
    got += chunk
    sys.stderr.write("HOST " + chunk.hex() + "\n"); sys.stderr.flush()
'''


class Canary:
    """A Unix socket on this host that no stream may reach: it counts connections."""

    def __init__(self, path: Path) -> None:
        self.path, self.connections = path, 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        threading.Thread(target=self._count, daemon=True).start()

    def _count(self) -> None:
        while True:
            try:
                self.sock.accept()[0].close()
            except OSError:
                return
            self.connections += 1


@pytest.fixture
def rig(tmp_path: Path, second_engine: Any,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("AGENTBENCH_API_KEY", KEY)
    short = Path(tempfile.mkdtemp(prefix="ab-tun-"))  # a socket's path: at most 107 bytes
    client = docker.DockerClient(base_url=second_engine.unix_host)
    factory = DockerSandboxFactory(client, transfer="archive", engine="second")
    with FakeOpenAIServer([]) as upstream:
        resolved = resolve_model_config(variant={
            "preset": "openrouter", "name": "eval/m", "base_url": upstream.base_url,
            "max_retries": 1})
        events = EventSink(tmp_path / "events.jsonl", "run-1", "task-1", "attempt-1")
        gateway = ModelGateway.for_model(resolved, Budget.from_dict({}), time.monotonic() + 300,
                                         events)
        gateway.start(unix_socket=short / "gateway.sock")
        try:
            with open_labelled(factory, small_spec(tmp_path)) as make:
                yield {"sandbox": make(), "gateway": gateway, "upstream": upstream,
                       "canary": Canary(short / "docker.sock"), "client": client}
        finally:
            gateway.close()
            client.close()
            shutil.rmtree(short, ignore_errors=True)


def _hostile(rig: dict[str, Any], frames: bytes,
             **pump_args: Any) -> tuple[Any, TunnelPump]:
    channel = rig["sandbox"].attach(["python3", "-c", HOSTILE, (encode(READY, 0) + frames).hex()])
    pump = TunnelPump(channel, rig["gateway"].socket_path, **pump_args).start()
    assert pump.wait_ready(30) or pump.problem, channel.stderr_tail()
    return channel, pump


def _exited(rig: dict[str, Any], channel: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not rig["client"].api.exec_inspect(channel.exec_id)["Running"]:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize(("frames", "says"), [
    (struct.pack(">BII", OPEN, 1, 26) + b"unix:/var/run/docker.sock\n", "OPEN frame with 26"),
    (struct.pack(">BII", OPEN, 1, 0) + struct.pack(">BII", DATA, 1, 1 << 30) + b"x" * 4096,
     "at most 65536"),
    (b"GET /containers/json HTTP/1.1\r\nHost: docker\r\n\r\n", "kind 71"),
    (encode(DATA, 9, b"POST /v1/chat/completions"), "stream 9, never opened"),
    (encode(OPEN, 2) + encode(OPEN, 1), "OPEN of stream 1 after stream 2"),
])
def test_a_hostile_frame_from_the_remote_sandbox_closes_the_transport(
        rig: dict[str, Any], frames: bytes, says: str) -> None:
    channel, pump = _hostile(rig, frames)
    try:
        assert _exited(rig, channel), "the process still runs: its transport stayed open"
        assert pump.problem is not None and says in pump.problem, pump.problem
        assert pump.problem.startswith("malformed frame from the sandbox")
        assert rig["canary"].connections == 0
        assert rig["upstream"].requests == []
    finally:
        pump.close()


def _sent_back(channel: Any) -> bytes:
    """What the host sent the hostile process (it echoes it to its stderr, in hex)."""
    return bytes.fromhex("".join(line.split(" ", 1)[1] for line in
                                 channel.stderr_tail().splitlines() if line.startswith("HOST ")))


def _http(stream: int, request: bytes) -> bytes:
    return encode(OPEN, stream) + encode(DATA, stream, request) + encode(EOF, stream)


def test_well_formed_streams_reach_the_gateway_only_and_it_refuses_all_but_model_calls(
        rig: dict[str, Any]) -> None:
    token = rig["gateway"].token
    asks = [b"GET /v1/models HTTP/1.1\r\nAuthorization: Bearer " + token.encode() + b"\r\n\r\n",
            b"POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer sk-other\r\n"
            b"Content-Length: 2\r\nConnection: close\r\n\r\n{}",
            b"GET /var/run/docker.sock HTTP/1.1\r\nHost: unix:/var/run/docker.sock\r\n"
            b"Authorization: Bearer " + token.encode() + b"\r\nConnection: close\r\n\r\n"]
    channel, pump = _hostile(rig, b"".join(_http(i + 1, a) for i, a in enumerate(asks)))
    try:
        wanted = (b"'/v1/models'", b"not this attempt's token", b"'/var/run/docker.sock'")
        deadline = time.monotonic() + 20
        while not all(w in (back := _sent_back(channel)) for w in wanted):
            assert time.monotonic() < deadline, back
            time.sleep(0.1)
        assert b"HTTP/1.1 404" in back and b"no model call at '/v1/models'" in back, back
        assert b"HTTP/1.1 403" in back and b"not this attempt's token" in back, back
        assert b"no model call at '/var/run/docker.sock'" in back, back
        assert pump.problem is None and pump.opened == 3, pump.stats
        assert rig["canary"].connections == 0
        assert rig["upstream"].requests == []  # refused before the model
    finally:
        pump.close()
    assert _exited(rig, channel)  # closing the pump ends the process's stdin


def test_streams_past_the_limit_are_refused_and_the_transport_stays(rig: dict[str, Any]) -> None:
    channel, pump = _hostile(rig, b"".join(encode(OPEN, i) for i in (1, 2, 3)), max_streams=2)
    try:
        deadline = time.monotonic() + 20
        while pump.refused == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (pump.opened, pump.refused, pump.problem) == (2, 1, None), pump.stats
        assert not _exited(rig, channel, timeout=1)
    finally:
        pump.close()
