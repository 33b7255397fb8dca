"""An `ssh://` engine reached the way the docker CLI reaches it (the user's `ssh` binary and
~/.ssh/config, `docker system dial-stdio` on the far side), exposed to docker-py as a unix socket.

Why not docker-py's own `use_ssh_client=True`: its transport module imports paramiko even when
it shells out (not a dependency here), its pipe-backed "socket" ignores every timeout (a hung
engine blocks a worker forever) and is no real socket for hijacked exec streams. Here each
connection docker-py opens to the bridge's socket (in a private 0700 directory: the socket is
root on the far engine) becomes one `ssh ... docker system dial-stdio` process whose stdin and
stdout are pumped both ways; timeouts apply on the socket as for any unix engine. One ssh master
connection (ControlMaster, private ControlPath) carries them all, so a new connection costs a
channel, not a handshake, and one dial-stdio is kept started ahead for the next connection.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import socket
import subprocess
import tempfile
import threading
import urllib.parse
import weakref
from pathlib import Path
from typing import IO

REQUEST_PING = b"GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n"
_LIVE: weakref.WeakSet[SshBridge] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Bridges still open at exit close last: registered when this module is imported, before
    docker.containers' hooks (which remove containers through them) are (atexit runs LIFO)."""
    for bridge in list(_LIVE):
        bridge.close()


class SshBridge:
    """A local unix socket (`url`) whose connections are `docker system dial-stdio` over ssh."""

    def __init__(self, ssh_url: str, connect_timeout: float = 30.0) -> None:
        parts = urllib.parse.urlsplit(ssh_url)
        self.directory = Path(tempfile.mkdtemp(prefix="agentbench-ssh-"))
        self.control = ["-o", "ControlMaster=auto", "-o", f"ControlPath={self.directory}/cm",
                        "-o", "ControlPersist=30"]
        self.target = (["-l", parts.username] if parts.username else []) + (
            ["-p", str(parts.port)] if parts.port else []) + ["--", str(parts.hostname)]
        self.options = ["-o", "BatchMode=yes", "-o",
                        f"ConnectTimeout={max(1, int(connect_timeout))}", *self.control]
        self.path = self.directory / "docker.sock"
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._spare: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self._server.listen(64)
        threading.Thread(target=self._accept, name="ssh-bridge", daemon=True).start()
        _LIVE.add(self)

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def argv(self, command: str = "docker system dial-stdio") -> list[str]:
        return ["ssh", *self.options, *self.target, command]

    def ping(self, timeout: float) -> tuple[bool, str]:
        """One `GET /_ping` through a fresh dial-stdio: (answered 200, ssh's last words or the
        status line). Starts the master connection the others share."""
        try:
            proc = subprocess.run(self.argv(), input=REQUEST_PING, capture_output=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, f"no answer in {timeout:g}s"
        if proc.stdout.startswith(b"HTTP/1.1 200"):
            return True, ""
        words = [w for w in proc.stderr.decode(errors="replace").splitlines() if w.strip()]
        status = proc.stdout.split(b"\r\n", 1)[0].decode(errors="replace")
        return False, words[-1] if words else status or f"ssh exit {proc.returncode}, no answer"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        proc = self._take()
        if proc is None:
            conn.close()
            return
        assert proc.stdin is not None and proc.stdout is not None
        upstream = threading.Thread(target=_to_pipe, args=(conn, proc.stdin), daemon=True)
        upstream.start()
        _to_socket(proc.stdout, conn)
        upstream.join(timeout=5)
        conn.close()
        self._end(proc)

    def _spawn(self) -> subprocess.Popen[bytes] | None:
        try:
            proc = subprocess.Popen(self.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            return None
        with self._lock:
            if not self._closed:
                self._procs.add(proc)
                return proc
        self._end(proc)
        return None

    def _take(self) -> subprocess.Popen[bytes] | None:
        """A dial-stdio for a new connection: the spare one started ahead (a hijacked exec
        stream takes its connection for good, so every exec needs a fresh one: ~0.2 s of ssh
        channel and remote CLI start saved), then another spare is started."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None and spare.poll() is not None:  # the engine went away meanwhile
            self._end(spare)
            spare = None
        threading.Thread(target=self._refill, daemon=True).start()
        return spare or self._spawn()

    def _refill(self) -> None:
        proc = self._spawn()
        if proc is None:
            return
        with self._lock:
            if self._spare is None and not self._closed:
                self._spare = proc
                return
        self._end(proc)

    def _end(self, proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        with self._lock:
            self._procs.discard(proc)

    def close(self) -> None:
        """Stop accepting, end every dial-stdio and the master connection, remove the socket."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            procs = list(self._procs)
        with contextlib.suppress(OSError):
            self._server.close()
        for proc in procs:
            self._end(proc)
        with self._lock:
            self._procs.clear()
            self._spare = None
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["ssh", *self.control, "-O", "exit", *self.target],
                           capture_output=True, timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


def _to_pipe(conn: socket.socket, pipe: IO[bytes]) -> None:
    """The client's bytes to ssh; EOF from the client closes ssh's stdin (a half-close)."""
    try:
        while data := conn.recv(65536):
            pipe.write(data)
            pipe.flush()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            pipe.close()


def _to_socket(pipe: IO[bytes], conn: socket.socket) -> None:
    """ssh's bytes to the client; EOF from ssh half-closes the client's read side."""
    try:
        while data := pipe.read1(65536):  # type: ignore[attr-defined]
            conn.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_WR)
