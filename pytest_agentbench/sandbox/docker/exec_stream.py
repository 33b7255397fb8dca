"""An exec's hijacked connection read without losing what came with the engine's answer.

`POST /exec/{id}/start` with `Upgrade: tcp` is answered `101 UPGRADED`, then the connection
carries the process's stdin (written) and its output (read) multiplexed: frames of an 8-byte
header (stream: 1 stdout, 2 stderr; 3 zero bytes; a big-endian 32-bit size) and their bytes.

docker-py (7.2) reads that output from the raw socket under the HTTP response
(`APIClient._get_raw_response_socket`), past the buffered reader that parsed the answer's head.
Whatever arrived in the same read as the head sits in that buffer and is never seen
(docker/docker-py#3332, #425): a fast command's whole output when the engine's bytes come in one
piece, as they do over an ssh channel or a link that holds them a moment, or on a loaded host.
Here the output is read through that same buffered reader, so nothing is skipped.

The socket's timeout (the client's, for every API call) is cleared, as docker-py does for its
log streams: a command or a relay may be silent longer than it, and the caller bounds the wait
(it closes the stream, which ends a blocked read).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import docker.errors

from pytest_agentbench.sandbox.capture import OutputBuffer
from pytest_agentbench.sandbox.docker.containers import DockerErrors

HEADER = struct.Struct(">BxxxI")
STDOUT, STDERR = 1, 2
CHUNK = 64 << 10  # the most of one frame handed on at once


class ExecStream:
    """The output frames of one started exec, and its stdin (`sendall`)."""

    def __init__(self, response: Any) -> None:
        self._response = response  # held: its collection would close a TLS connection
        self._reader = response.raw._fp.fp  # http.client's buffered reader of the connection
        self._sock = self._reader.raw._sock  # a Unix socket, or the SSLSocket over TCP
        self._sock.settimeout(None)
        self._closed = False

    def frames(self) -> Iterator[tuple[int, bytes]]:
        """(stream, bytes) as they come, a large frame in pieces; ends at the connection's end
        (a cut-off header or frame ends it too)."""
        try:
            while True:
                header = self._reader.read(HEADER.size)
                if len(header) < HEADER.size:
                    return
                kind, left = HEADER.unpack(header)
                while left:
                    chunk = self._reader.read1(min(left, CHUNK))
                    if not chunk:
                        return
                    left -= len(chunk)
                    yield kind, chunk
        except ValueError as exc:  # the reader closed under a read: by close(), the end
            if not self._closed:
                raise OSError(f"the exec's connection: {exc}") from exc

    def sendall(self, data: bytes) -> None:
        self._sock.sendall(data)

    def close(self) -> None:
        """End the connection; a read blocked on it in another thread returns at once."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):  # the plain socket's: an SSLSocket's own would
            socket.socket.shutdown(self._sock, socket.SHUT_RDWR)  # drop TLS under a writer
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(Exception):
            self._response.close()


def drain(stream: ExecStream, out: OutputBuffer, err: OutputBuffer,
          errors: list[BaseException]) -> None:
    """A reader thread's work: the stream's stdout and stderr into their buffers to its end;
    what broke it, if anything, in `errors`."""
    try:
        for kind, chunk in stream.frames():
            (out if kind == STDOUT else err).append(chunk)  # an engine's own: stderr
    except Exception as exc:  # noqa: BLE001 - reported by the waiting thread
        errors.append(exc)


def start(api: Any, exec_id: str) -> ExecStream:
    """Start a created exec (not detached, no tty) and hold its connection; an engine's refusal
    raises docker.errors.APIError as docker-py's `exec_start` does."""
    response = api._post_json(api._url("/exec/{0}/start", exec_id),
                              headers={"Connection": "Upgrade", "Upgrade": "tcp"},
                              data={"Tty": False, "Detach": False}, stream=True)
    api._raise_for_status(response)
    try:
        return ExecStream(response)
    except (AttributeError, OSError) as exc:  # a client whose response holds no socket
        response.close()
        raise docker.errors.DockerException(f"cannot hold the exec's connection: {exc}") from exc


ONE_SHOT_SEC = 30.0  # the harness's own short execs (a check, a measure, a kill, a probe)


def output(api: Any, exec_id: str, timeout_sec: float = ONE_SHOT_SEC) -> bytes:
    """Start a created exec and read its stdout and stderr to the end, in the order they came
    (what docker-py's `exec_start(exec_id)` returns). An exec whose stream has not ended within
    `timeout_sec` (a silent engine, a hung process) is closed and raises DockerException: the
    socket's own timeout is off (see the module's docstring), so this is its only bound."""
    stream = start(api, exec_id)
    overran = threading.Event()

    def cut() -> None:
        overran.set()
        stream.close()

    timer = threading.Timer(timeout_sec, cut)
    timer.daemon = True
    timer.start()
    try:
        data = b"".join(chunk for _, chunk in stream.frames())
    finally:
        timer.cancel()
        stream.close()
    if overran.is_set():
        raise docker.errors.DockerException(
            f"exec {exec_id[:12]} did not end within {timeout_sec:g} s; its stream was closed")
    return data


def exit_code(api: Any, exec_id: str, wait_sec: float = 2.0) -> int | None:
    """An exec's exit status as the engine saw it (128+n if a signal killed it), asked until it
    has one (its stream can end a moment before the engine records it) for up to `wait_sec`;
    None when it has none by then or cannot be asked."""
    deadline = time.monotonic() + wait_sec
    with contextlib.suppress(*DockerErrors):
        while True:
            info = api.exec_inspect(exec_id)
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            if time.monotonic() > deadline:
                return None
            time.sleep(0.005)
    return None
