"""The host's end of a remote sandbox's model relay: frames from a held exec <-> the attempt's
gateway socket.

`TunnelPump(channel, socket_path)` reads the frames the sandbox's relay (gateway/tunnel_relay.py)
writes to its stdout, as the engine delivers them (`channel`: the exec's stdin and stdout, see
sandbox.port.Channel), and connects every stream it opens to `socket_path`, the attempt's gateway
socket: that path is fixed when the pump is made, and no frame names another (a frame has no
destination). Everything in a frame is untrusted:

- a frame that breaks the protocol (tunnel_relay.Decoder: unknown kind, payload over
  MAX_PAYLOAD, payload on a control frame), an OPEN whose id does not grow, a second READY, or a
  DATA/EOF for a stream never opened closes the whole transport: `problem` says why, and no
  stream of it reaches the gateway again (fail closed);
- past MAX_STREAMS open streams a new one is refused (CLOSE) and counted in `refused`;
- a stream the gateway does not take within SEND_TIMEOUT_SEC is dropped.

The gateway behind the socket answers model calls of its attempt only (gateway/server.py): the
pump adds no way out of the sandbox, only a longer wire.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from importlib import resources
from pathlib import Path

from pytest_agentbench.gateway.tunnel_relay import (
    CLOSE,
    DATA,
    EOF,
    FROM_SANDBOX,
    MAX_PAYLOAD,
    NAMES,
    OPEN,
    READY,
    Decoder,
    FrameError,
    encode,
)
from pytest_agentbench.sandbox.port import Channel

MAX_STREAMS = 64
SEND_TIMEOUT_SEC = 60.0
RELAY_FILE = "tunnel_relay.py"


def relay_argv(port: int) -> list[str]:
    """The command that starts the relay in a sandbox: its source travels as an argument (a
    remote sandbox has no file of ours), run isolated from the environment and the cwd."""
    source = (resources.files("pytest_agentbench.gateway") / RELAY_FILE).read_text("utf-8")
    return ["python3", "-I", "-S", "-c", source, str(port)]


class TunnelPump:
    """Pumps one held exec's frames to `socket_path` and back (module docstring). `start()`,
    then `wait_ready()`; `close()` ends the transport and every stream."""

    def __init__(self, channel: Channel, socket_path: Path, *,
                 max_streams: int = MAX_STREAMS) -> None:
        self.channel, self.socket_path, self.max_streams = channel, str(socket_path), max_streams
        self.problem: str | None = None  # why the transport closed before `close()`
        self.opened = self.refused = 0
        self._streams: dict[int, socket.socket] = {}
        self._ended: dict[int, set[str]] = {}
        self._last_id = 0
        self._ready = threading.Event()
        self._lock = threading.Lock()  # the stream tables
        self._write = threading.Lock()  # one frame at a time into the channel
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="gateway-tunnel", daemon=True)

    def start(self) -> TunnelPump:
        self._thread.start()
        return self

    def wait_ready(self, timeout: float) -> bool:
        """Whether the relay said it listens within `timeout` seconds."""
        self._ready.wait(timeout)
        return self._ready.is_set() and self.problem is None

    @property
    def stats(self) -> dict[str, object]:
        return {"streams": self.opened, "refused_streams": self.refused, "problem": self.problem}

    def close(self) -> None:
        self._closing = True
        self._shut_down()
        self._thread.join(timeout=5)

    # -- the sandbox's frames ----------------------------------------------------------------
    def _run(self) -> None:
        decoder = Decoder(FROM_SANDBOX)
        try:
            while True:
                chunk = self.channel.recv(MAX_PAYLOAD + 64)
                if not chunk:
                    self._fail("the sandbox's relay ended")
                    return
                for kind, stream, payload in decoder.feed(chunk):
                    self._frame(kind, stream, payload)
        except FrameError as exc:
            self._fail(f"malformed frame from the sandbox: {exc}")
        except OSError as exc:
            self._fail(f"the exec stream broke: {exc}")
        finally:
            self._ready.set()  # a waiter learns of the problem at once
            self._shut_down()

    def _frame(self, kind: int, stream: int, payload: bytes) -> None:
        if kind == READY:
            if self._ready.is_set():
                raise FrameError("a second READY")
            self._ready.set()
            return
        if not self._ready.is_set():
            raise FrameError(f"{NAMES[kind]} before READY")
        if kind == OPEN:
            self._open(stream)
            return
        if stream > self._last_id:
            raise FrameError(f"{NAMES[kind]} on stream {stream}, never opened")
        conn = self._streams.get(stream)
        if conn is None:  # dropped on this side: what was in flight is discarded
            return
        if kind == DATA:
            try:
                conn.sendall(payload)
            except OSError:
                self._drop(stream, tell=True)
        elif kind == EOF:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_WR)
            self._end(stream, "out")
        elif kind == CLOSE:
            self._drop(stream)

    def _open(self, stream: int) -> None:
        if stream <= self._last_id:
            raise FrameError(f"OPEN of stream {stream} after stream {self._last_id}")
        self._last_id = stream
        if len(self._streams) >= self.max_streams:
            self.refused += 1
            self._send(encode(CLOSE, stream))
            return
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(SEND_TIMEOUT_SEC)
        try:
            conn.connect(self.socket_path)  # the one place a stream can go
        except OSError:
            conn.close()
            self._send(encode(CLOSE, stream))
            return
        self.opened += 1  # its timeout stays: a gateway that stops reading drops the stream
        with self._lock:
            self._streams[stream], self._ended[stream] = conn, set()
        threading.Thread(target=self._back, args=(stream, conn), daemon=True).start()

    # -- the gateway's answers -----------------------------------------------------------------
    def _back(self, stream: int, conn: socket.socket) -> None:
        try:
            while True:
                try:
                    chunk = conn.recv(MAX_PAYLOAD)
                except TimeoutError:  # a slow model: the answer is still coming
                    if stream not in self._streams:
                        return
                    continue
                if not chunk:
                    break
                self._send(encode(DATA, stream, chunk))
        except OSError:
            self._drop(stream, tell=True)
            return
        self._send(encode(EOF, stream))
        self._end(stream, "in")

    def _end(self, stream: int, direction: str) -> None:
        with self._lock:
            ended = self._ended.get(stream)
            if ended is None:
                return
            ended.add(direction)
            finished = len(ended) == 2
        if finished:
            self._drop(stream)

    def _drop(self, stream: int, tell: bool = False) -> None:
        with self._lock:
            conn = self._streams.pop(stream, None)
            self._ended.pop(stream, None)
        if conn is None:
            return
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
        conn.close()
        if tell:
            self._send(encode(CLOSE, stream))

    def _send(self, frame: bytes) -> None:
        with self._write:
            if self._closing or self.problem is not None:
                return
            try:
                self.channel.sendall(frame)
            except OSError as exc:
                self.problem = self.problem or f"the exec stream broke: {exc}"

    def _fail(self, why: str) -> None:
        if not self._closing and self.problem is None:
            self.problem = why

    def _shut_down(self) -> None:
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            self._drop(stream)
        with contextlib.suppress(OSError):
            self.channel.close()
