"""A process in a Docker sandbox held open through the engine's API: its stdin and stdout as a
byte channel (sandbox.port.Channel), over whatever connection the client has (a Unix socket,
TCP with TLS, ...): nothing of the host is mounted, so it works on a remote engine.

The exec's connection (sandbox/docker/exec_stream.py: read through the HTTP response's buffer,
no timeout of its own) carries the process's stdin (`sendall`) and its multiplexed output:
`recv` returns stdout bytes only, the stderr ones are kept apart (the last STDERR_KEEP bytes)
for a message.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from pytest_agentbench.sandbox.docker.exec_stream import STDOUT, ExecStream

STDERR_KEEP = 8 << 10


class DockerChannel:
    def __init__(self, stream: ExecStream, exec_id: str = "") -> None:
        self.exec_id = exec_id  # the engine's exec: whether the process still runs
        self._stream = stream
        self._frames: Iterator[tuple[int, bytes]] = stream.frames()
        self._pending = b""  # stdout bytes of the current piece not yet returned
        self._stderr = bytearray()
        self._write = threading.Lock()
        self._closed = False

    def recv(self, size: int) -> bytes:
        while not self._pending:
            piece = next(self._frames, None)
            if piece is None:
                return b""
            kind, chunk = piece
            if kind == STDOUT:
                self._pending = chunk
            else:  # stderr (or an engine's own stream): kept aside
                self._stderr = (self._stderr + chunk)[-STDERR_KEEP:]
        chunk, self._pending = self._pending[:size], self._pending[size:]
        return chunk

    def sendall(self, data: bytes) -> None:
        with self._write:
            if self._closed:
                raise OSError("the channel is closed")
            self._stream.sendall(data)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stream.close()

    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace")
