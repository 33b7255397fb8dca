"""A link to a Docker engine that holds the engine's bytes a moment and hands them on in one
write, as an ssh channel or a loaded host may: a Unix socket of the test's own, each connection
to it forwarded to the engine's socket. The client's bytes go through at once; the engine's
wait HOLD_SEC after the first of a burst, then everything that came meanwhile goes as one
`sendall`. So the `101 UPGRADED` answer of an exec and a fast command's whole output reach the
client together (`chunks` keeps what each write carried, for a test to check that they did).
"""

from __future__ import annotations

import contextlib
import select
import socket
import tempfile
import threading
import time
from pathlib import Path

HOLD_SEC = 0.15


class SlowLink:
    def __init__(self, engine_socket: str = "/var/run/docker.sock") -> None:
        self.engine_socket = engine_socket
        self.directory = Path(tempfile.mkdtemp(prefix="agentbench-slowlink-"))
        self.path = self.directory / "docker.sock"
        self.chunks: list[bytes] = []
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self._server.listen(32)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._server.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
            self.directory.rmdir()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            engine.connect(self.engine_socket)
            threading.Thread(target=_through, args=(client, engine), daemon=True).start()
            threading.Thread(target=self._held, args=(engine, client), daemon=True).start()

    def _held(self, engine: socket.socket, client: socket.socket) -> None:
        ended = False
        try:
            while not ended:
                data = engine.recv(65536)
                if not data:
                    break
                time.sleep(HOLD_SEC)
                while not ended and select.select([engine], [], [], 0)[0]:
                    more = engine.recv(65536)
                    ended = not more
                    data += more
                self.chunks.append(data)
                client.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_WR)


def _through(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
