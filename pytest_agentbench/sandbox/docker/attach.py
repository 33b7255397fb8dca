"""A process in a Docker sandbox held open through the engine's API: its stdin and stdout as a
byte channel (sandbox.port.Channel), over whatever connection the client has (a Unix socket,
TCP with TLS, ...): nothing of the host is mounted, so it works on a remote engine.

`exec_start(socket=True)` gives the hijacked connection. Bytes written to it are the process's
stdin; what comes back is multiplexed (no tty): frames of an 8-byte header (stream: 1 stdout,
2 stderr; 3 zero bytes; a big-endian 32-bit size) and their bytes. `recv` returns stdout bytes
only, the stderr ones are kept apart (the last STDERR_KEEP bytes) for a message.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from typing import Any

STDERR_KEEP = 8 << 10
HEADER = struct.Struct(">BxxxI")


class DockerChannel:
    def __init__(self, hijacked: Any, exec_id: str = "") -> None:
        self.exec_id = exec_id  # the engine's exec: whether the process still runs
        self._keep = hijacked  # holds the HTTP response: its collection would close TLS
        # a Unix socket comes wrapped in a SocketIO; a TLS one is the SSLSocket itself
        self._sock: Any = (getattr(hijacked, "_sock")  # noqa: B009 - private to mypy
                           if isinstance(hijacked, socket.SocketIO)
                           else hijacked)
        self._left = 0  # stdout bytes of the current frame not yet returned
        self._stderr = bytearray()
        self._write = threading.Lock()
        self._closed = False

    def recv(self, size: int) -> bytes:
        while self._left == 0:
            header = self._exactly(HEADER.size)
            if header is None:
                return b""
            kind, length = HEADER.unpack(header)
            if kind == 1:
                self._left = length
                continue
            body = self._exactly(length)  # stderr (or an engine's own stream): kept aside
            if body is None:
                return b""
            self._stderr = (self._stderr + body)[-STDERR_KEEP:]
        chunk = self._sock.recv(min(size, self._left))
        self._left -= len(chunk)
        return bytes(chunk)

    def _exactly(self, size: int) -> bytes | None:
        buffer = bytearray()
        while len(buffer) < size:
            chunk = self._sock.recv(size - len(buffer))
            if not chunk:
                return None
            buffer += chunk
        return bytes(buffer)

    def sendall(self, data: bytes) -> None:
        with self._write:
            if self._closed:
                raise OSError("the channel is closed")
            self._sock.sendall(data)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(Exception):
            self._keep.close()

    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace")
