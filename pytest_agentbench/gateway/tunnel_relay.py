"""The model relay of a sandbox on a remote engine, and the frames it speaks with the host.

On an engine that cannot see this host's files (transfer archive) the gateway's Unix socket
cannot be mounted into the sandbox. The harness instead starts this file by `docker exec`
(`python3 -I -S -c SOURCE PORT`, as the container's own user, so the agent's commands can neither
kill it nor read its pipes) and holds the exec open: the relay listens on the sandbox's loopback
(127.0.0.1:PORT, as the local relay does) and carries every connection's bytes as frames on its
stdout and stdin; the host's pump (gateway/tunnel.py) connects each stream to the attempt's
gateway socket and to nothing else. Standard library only: it runs on the sandbox's Python.

A frame is a 9-byte header, then its payload:

    kind (1 byte) | stream id (4 bytes, big-endian) | payload length (4 bytes, big-endian)

    READY  sandbox -> host   stream 0, no payload: the relay listens
    OPEN   sandbox -> host   a new connection; ids only grow, from 1; no payload
    DATA   both ways         1..MAX_PAYLOAD bytes of that connection
    EOF    both ways         the sender sends no more on that stream (half close)
    CLOSE  both ways         the stream is gone (either side may drop it)

There is no destination anywhere in a frame: where a stream goes is the host's decision alone.
A frame that breaks these rules (an unknown kind, a payload over MAX_PAYLOAD, a payload on
anything but DATA, stream 0 on anything but READY) raises FrameError, and either side then drops
the whole transport: it fails closed.
"""

import contextlib
import os
import socket
import struct
import sys
import threading

HEADER = struct.Struct(">BII")
READY, OPEN, DATA, EOF, CLOSE = 1, 2, 3, 4, 5
NAMES = {READY: "READY", OPEN: "OPEN", DATA: "DATA", EOF: "EOF", CLOSE: "CLOSE"}
MAX_PAYLOAD = 64 << 10
FROM_SANDBOX = frozenset(NAMES)
FROM_HOST = frozenset((DATA, EOF, CLOSE))


class FrameError(Exception):
    """A frame that breaks the protocol: the transport is dropped."""


def encode(kind: int, stream: int, payload: bytes = b"") -> bytes:
    """One frame (a DATA payload over MAX_PAYLOAD is the caller's to split: see `data`)."""
    if kind not in NAMES or len(payload) > MAX_PAYLOAD or (kind == DATA) != bool(payload) \
            or (kind == READY) != (stream == 0) or not 0 <= stream <= 0xFFFFFFFF:
        raise FrameError(f"cannot encode {NAMES.get(kind, kind)} stream {stream} with "
                         f"{len(payload)} bytes")
    return HEADER.pack(kind, stream, len(payload)) + payload


def data(stream: int, payload: bytes) -> bytes:
    """DATA frames carrying `payload`, split at MAX_PAYLOAD."""
    return b"".join(encode(DATA, stream, payload[i:i + MAX_PAYLOAD])
                    for i in range(0, len(payload), MAX_PAYLOAD))


class Decoder:
    """Frames out of a byte stream fed in pieces; `allowed`: the kinds this side accepts. What
    it holds is bounded: at most one header and one payload's bytes of an unfinished frame."""

    def __init__(self, allowed: frozenset[int] = FROM_SANDBOX) -> None:
        self.allowed = allowed
        self.buffer = bytearray()

    def feed(self, chunk: bytes) -> list[tuple[int, int, bytes]]:
        """The (kind, stream, payload) frames completed by `chunk`; FrameError at the first
        frame that breaks the rules (its header is enough to tell)."""
        self.buffer += chunk
        frames = []
        while len(self.buffer) >= HEADER.size:
            kind, stream, size = HEADER.unpack_from(self.buffer)
            if kind not in self.allowed:
                raise FrameError(f"frame kind {kind} is not one this side accepts")
            if size > MAX_PAYLOAD:
                raise FrameError(f"{NAMES[kind]} frame of {size} bytes (at most {MAX_PAYLOAD})")
            if (kind == DATA) != (size > 0):
                raise FrameError(f"{NAMES[kind]} frame with {size} bytes of payload")
            if (kind == READY) != (stream == 0):
                raise FrameError(f"{NAMES[kind]} frame on stream {stream}")
            if len(self.buffer) < HEADER.size + size:
                break
            payload = bytes(self.buffer[HEADER.size:HEADER.size + size])
            del self.buffer[:HEADER.size + size]
            frames.append((kind, stream, payload))
        return frames


# -- the relay, inside the sandbox --------------------------------------------------------------
class Relay:
    """Loopback connections <-> frames on stdout/stdin."""

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.lock = threading.Lock()  # one frame at a time on stdout
        self.conns: dict[int, socket.socket] = {}  # stream id -> its connection
        self.done: dict[int, set[str]] = {}  # stream id -> directions ended ("in", "out")
        self.next_id = 1

    def send(self, frame: bytes) -> None:
        with self.lock:
            view = memoryview(frame)
            while view:
                view = view[os.write(1, view):]

    def accept(self) -> None:
        while True:
            conn, _ = self.listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                stream, self.next_id = self.next_id, self.next_id + 1
                self.conns[stream], self.done[stream] = conn, set()
            self.send(encode(OPEN, stream))
            threading.Thread(target=self.pump, args=(stream, conn), daemon=True).start()

    def pump(self, stream: int, conn: socket.socket) -> None:
        """The connection's bytes out as DATA, then EOF (or CLOSE when it broke)."""
        try:
            while True:
                chunk = conn.recv(MAX_PAYLOAD)
                if not chunk:
                    break
                self.send(encode(DATA, stream, chunk))
        except OSError:
            self.drop(stream, tell=True)
            return
        self.send(encode(EOF, stream))
        self.ended(stream, "in")

    def ended(self, stream: int, direction: str) -> None:
        with self.lock:
            done = self.done.get(stream)
            if done is None:
                return
            done.add(direction)
            finished = len(done) == 2
        if finished:
            self.drop(stream)

    def drop(self, stream: int, tell: bool = False) -> None:
        with self.lock:
            conn = self.conns.pop(stream, None)
            self.done.pop(stream, None)
        if conn is None:
            return
        with contextlib.suppress(OSError):  # wakes its pump's recv; close alone would not
            conn.shutdown(socket.SHUT_RDWR)
        conn.close()
        if tell:
            self.send(encode(CLOSE, stream))

    def host_frame(self, kind: int, stream: int, payload: bytes) -> None:
        conn = self.conns.get(stream)
        if conn is None:  # a stream this side dropped already
            return
        if kind == DATA:
            try:
                conn.sendall(payload)
            except OSError:
                self.drop(stream, tell=True)
        elif kind == EOF:
            try:
                conn.shutdown(socket.SHUT_WR)
            except OSError:
                self.drop(stream, tell=True)
                return
            self.ended(stream, "out")
        else:
            self.drop(stream)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        sys.stderr.write("usage: tunnel_relay PORT\n")
        return 2
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", int(argv[0])))
    except OSError as exc:
        sys.stderr.write(f"relay: cannot listen on 127.0.0.1:{argv[0]}: {exc}\n")
        return 1
    listener.listen(64)
    relay = Relay(listener)
    relay.send(encode(READY, 0))
    threading.Thread(target=relay.accept, daemon=True).start()
    decoder = Decoder(FROM_HOST)
    while True:
        chunk = os.read(0, MAX_PAYLOAD + HEADER.size)
        if not chunk:  # the host closed the transport
            return 0
        try:
            frames = decoder.feed(chunk)
        except FrameError as exc:
            sys.stderr.write(f"relay: {exc}; closing\n")
            return 1
        for kind, stream, payload in frames:
            relay.host_frame(kind, stream, payload)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
