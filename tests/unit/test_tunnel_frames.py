"""The remote model relay's frames (gateway/tunnel_relay.py) and the host pump's rules
(gateway/tunnel.py), with a socket pair standing in for the Docker exec and real Unix sockets
for the gateway and for a place no stream may reach."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_agentbench.gateway.tunnel import TunnelPump
from pytest_agentbench.gateway.tunnel_relay import (
    CLOSE,
    DATA,
    EOF,
    FROM_HOST,
    FROM_SANDBOX,
    MAX_PAYLOAD,
    OPEN,
    READY,
    Decoder,
    FrameError,
    data,
    encode,
)


def test_frames_round_trip_whatever_the_pieces() -> None:
    stream = (encode(READY, 0) + encode(OPEN, 1) + data(1, b"x" * (MAX_PAYLOAD + 5))
              + encode(EOF, 1) + encode(CLOSE, 1))
    for size in (1, 7, 9, 4096, len(stream)):
        decoder, frames = Decoder(), list[tuple[int, int, bytes]]()
        for i in range(0, len(stream), size):
            frames += decoder.feed(stream[i:i + size])
        assert [(k, s, len(p)) for k, s, p in frames] == [
            (READY, 0, 0), (OPEN, 1, 0), (DATA, 1, MAX_PAYLOAD), (DATA, 1, 5), (EOF, 1, 0),
            (CLOSE, 1, 0)]
        assert decoder.buffer == bytearray()


@pytest.mark.parametrize(("raw", "allowed", "says"), [
    (struct.pack(">BII", 9, 1, 0), FROM_SANDBOX, "kind 9"),
    (struct.pack(">BII", OPEN, 1, 0), FROM_HOST, "kind 2"),  # the host opens nothing
    (struct.pack(">BII", READY, 0, 0), FROM_HOST, "kind 1"),
    (struct.pack(">BII", DATA, 1, MAX_PAYLOAD + 1), FROM_SANDBOX, "at most"),
    (struct.pack(">BII", DATA, 1, 1 << 31), FROM_HOST, "at most"),
    (struct.pack(">BII", OPEN, 1, 26) + b"unix:/var/run/docker.sock\n", FROM_SANDBOX,
     "OPEN frame with 26 bytes"),  # a destination has no place in a frame
    (struct.pack(">BII", DATA, 1, 0), FROM_SANDBOX, "DATA frame with 0 bytes"),
    (struct.pack(">BII", OPEN, 0, 0), FROM_SANDBOX, "on stream 0"),
    (struct.pack(">BII", READY, 3, 0), FROM_SANDBOX, "READY frame on stream 3"),
])
def test_a_frame_that_breaks_the_rules_is_refused_from_its_header(
        raw: bytes, allowed: frozenset[int], says: str) -> None:
    decoder = Decoder(allowed)
    with pytest.raises(FrameError, match=says):
        decoder.feed(raw[:9])  # the header alone is enough: no payload is waited for


def test_encode_refuses_what_decode_would() -> None:
    for kind, stream, payload in [(DATA, 1, b""), (OPEN, 1, b"x"), (READY, 1, b""),
                                  (DATA, 1, b"x" * (MAX_PAYLOAD + 1)), (7, 1, b"")]:
        with pytest.raises(FrameError):
            encode(kind, stream, payload)


# -- the pump -----------------------------------------------------------------------------------
class PairChannel:
    """sandbox.port.Channel over one end of a socket pair (the other end plays the relay)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def recv(self, size: int) -> bytes:
        return self.sock.recv(size)

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the pump's recv, as the contract says
        self.sock.close()

    def stderr_tail(self) -> str:
        return ""


class Listener:
    """A Unix socket that counts connections and answers each with b'echo:' + what it read."""

    def __init__(self, path: Path) -> None:
        self.path, self.connections = path, 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        got = b""
        with conn, contextlib.suppress(OSError):  # the pump may drop the stream first
            while chunk := conn.recv(65536):
                got += chunk
            conn.sendall(b"echo:" + got)


Rig = tuple[socket.socket, TunnelPump, "Listener", "Listener"]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    relay_end, host_end = socket.socketpair()
    gateway, elsewhere = Listener(tmp_path / "gateway.sock"), Listener(tmp_path / "docker.sock")
    pump = TunnelPump(PairChannel(host_end), tmp_path / "gateway.sock", max_streams=2).start()
    relay_end.sendall(encode(READY, 0))
    assert pump.wait_ready(5)
    yield relay_end, pump, gateway, elsewhere
    pump.close()
    relay_end.close()


def _frames(sock: socket.socket, until: int, timeout: float = 5.0) -> list[tuple[int, int, bytes]]:
    """Frames the pump sent back, until one of kind `until` (or the channel closed)."""
    decoder, frames = Decoder(FROM_HOST), list[tuple[int, int, bytes]]()
    sock.settimeout(timeout)
    while not any(k == until for k, _, _ in frames):
        chunk = sock.recv(65536)
        if not chunk:
            break
        frames += decoder.feed(chunk)
    return frames


def test_a_stream_reaches_the_gateway_socket_and_comes_back(rig: Rig) -> None:
    relay, pump, gateway, elsewhere = rig
    relay.sendall(encode(OPEN, 1) + data(1, b"POST /v1/chat/completions") + encode(EOF, 1))
    frames = _frames(relay, EOF)
    assert b"".join(p for k, _, p in frames if k == DATA) == b"echo:POST /v1/chat/completions"
    assert (gateway.connections, elsewhere.connections) == (1, 0)
    assert pump.problem is None and pump.opened == 1


@pytest.mark.parametrize(("raw", "says"), [
    (struct.pack(">BII", OPEN, 1, 19) + b"/tmp/x/docker.sock\n", "OPEN frame with 19 bytes"),
    (struct.pack(">BII", DATA, 1, 1 << 30), "at most"),
    (struct.pack(">BII", 0x47, 0x45542F20, 0x2F204854), "kind 71"),  # "GET / HT..." raw
    (encode(DATA, 5, b"x"), "stream 5, never opened"),
    (encode(OPEN, 1) + encode(OPEN, 1), "OPEN of stream 1 after stream 1"),
    (encode(READY, 0), "a second READY"),
])
def test_a_malformed_frame_closes_the_whole_transport(rig: Rig, raw: bytes, says: str) -> None:
    relay, pump, gateway, elsewhere = rig
    relay.sendall(raw)
    relay.settimeout(5)
    deadline = time.monotonic() + 5
    while relay.recv(65536):  # the pump hangs up: the relay's stdin ends
        assert time.monotonic() < deadline
    assert pump.problem is not None and says in pump.problem, pump.problem
    assert "malformed frame" in pump.problem
    assert elsewhere.connections == 0 and gateway.connections <= 1


def test_streams_past_the_limit_are_refused_and_the_transport_stays(rig: Rig) -> None:
    relay, pump, gateway, _ = rig
    relay.sendall(encode(OPEN, 1) + encode(OPEN, 2) + encode(OPEN, 3))
    frames = _frames(relay, CLOSE)
    assert (CLOSE, 3, b"") in frames
    assert pump.refused == 1 and pump.problem is None
    relay.sendall(data(1, b"still here") + encode(EOF, 1))
    frames = _frames(relay, EOF)
    assert b"".join(p for k, s, p in frames if k == DATA and s == 1) == b"echo:still here"
    assert gateway.connections == 2


def test_a_gateway_that_is_not_there_closes_the_stream_only(tmp_path: Path) -> None:
    relay_end, host_end = socket.socketpair()
    pump = TunnelPump(PairChannel(host_end), tmp_path / "absent.sock").start()
    relay_end.sendall(encode(READY, 0) + encode(OPEN, 1))
    assert _frames(relay_end, CLOSE) == [(CLOSE, 1, b"")]
    assert pump.problem is None and pump.opened == 0
    pump.close()
