"""sandbox/docker/exec_stream.py through docker-py's real client, against a server on a Unix
socket that answers `POST /exec/{id}/start` as the engine does (`101 UPGRADED`, then frames) but
lays the bytes out as a test needs: the answer and the whole output in one write (docker-py's own
reading loses it, docker/docker-py#3332), a header cut into single bytes, an end mid-frame, a
flood the reader is closed under. The real engine's side: tests/docker/test_exec_stream_docker.py.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest

from pytest_agentbench.sandbox.docker import exec_stream
from pytest_agentbench.sandbox.docker.attach import DockerChannel

HEAD = (b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.multiplexed-stream\r\n"
        b"Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
Scenario = Callable[[socket.socket], None]


def frame(kind: int, data: bytes) -> bytes:
    return struct.pack(">BxxxI", kind, len(data)) + data


class Engine:
    """Answers every exec start by running `scenario` on the connection after its request."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "engine.sock"
        self.scenario: Scenario = lambda conn: None
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self._server.listen(8)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            while len(body) < length:
                body += conn.recv(65536)
            self.scenario(conn)

    def close(self) -> None:
        self._server.close()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[Engine, docker.APIClient]]:
    server = Engine(tmp_path)
    api = docker.APIClient(base_url=f"unix://{server.path}", version="1.41", timeout=5)
    yield server, api
    api.close()
    server.close()


def test_output_that_came_with_the_answer_is_read(
        engine: tuple[Engine, docker.APIClient]) -> None:
    server, api = engine
    server.scenario = lambda conn: conn.sendall(HEAD + frame(1, b"1\n2\n3\n") + frame(2, b"e\n"))
    assert exec_stream.output(api, "x") == b"1\n2\n3\ne\n"
    assert b"".join(api.exec_start("x", stream=True)) == b""  # docker-py's own reading


def test_a_header_in_single_bytes_a_large_frame_and_an_end_mid_frame(
        engine: tuple[Engine, docker.APIClient]) -> None:
    server, api = engine
    big = bytes(range(256)) * 1024

    def dribble(conn: socket.socket) -> None:
        conn.sendall(HEAD)
        for byte in frame(1, b"ab"):
            conn.sendall(bytes([byte]))
            time.sleep(0.002)
        conn.sendall(frame(2, big) + frame(3, b"engine") + frame(1, b"cut off")[:-3])

    server.scenario = dribble
    stream = exec_stream.start(api, "x")
    runs: list[tuple[int, bytes]] = []  # a frame may come in pieces: each run of one stream
    for kind, chunk in stream.frames():
        runs[-1:] = ([(kind, runs[-1][1] + chunk)] if runs and runs[-1][0] == kind
                     else [*runs[-1:], (kind, chunk)])
    stream.close()
    assert runs == [(1, b"ab"), (2, big), (3, b"engine"), (1, b"cut ")]


def test_a_channel_closed_under_a_flood_ends_quietly(
        engine: tuple[Engine, docker.APIClient]) -> None:
    server, api = engine

    def flood(conn: socket.socket) -> None:
        conn.sendall(HEAD)
        while True:
            conn.sendall(frame(1, b"x" * 512) + frame(2, b"y" * 64))

    server.scenario = flood
    for _ in range(30):
        channel = DockerChannel(exec_stream.start(api, "x"))
        ended: list[object] = []

        def read(target: DockerChannel = channel, into: list[object] = ended) -> None:
            try:
                while target.recv(4096):
                    pass
                into.append("end")
            except Exception as exc:  # noqa: BLE001 - what the tunnel's reader would meet
                into.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        time.sleep(0.005)
        channel.close()
        reader.join(2)
        assert ended == ["end"] and not reader.is_alive()
        with pytest.raises(OSError):
            channel.sendall(b"more")
        assert "y" in channel.stderr_tail()


def test_a_one_shot_exec_that_never_ends_is_cut_off(
        engine: tuple[Engine, docker.APIClient]) -> None:
    """The stream's socket has no timeout: `output` bounds the wait itself (the shell check,
    the disk measure, the kill and doctor's probe read their execs so)."""
    server, api = engine
    server.scenario = lambda conn: (conn.sendall(HEAD + frame(1, b"started\n")), time.sleep(5))
    began = time.monotonic()
    with pytest.raises(docker.errors.DockerException, match="did not end within 0.3 s"):
        exec_stream.output(api, "x", timeout_sec=0.3)
    assert time.monotonic() - began < 2
    server.scenario = lambda conn: conn.sendall(HEAD + frame(1, b"quick\n"))
    assert exec_stream.output(api, "x", timeout_sec=0.3) == b"quick\n"
