"""A TCP forwarder from a loopback port of this network namespace into another namespace.

Run as a script (no imports from the project), by tests/support/dockerd.py:

    python netns_forward.py NETNS_PATH TARGET_PORT [WATCH_PID]

It binds and listens on 127.0.0.1:<free port> in the namespace it starts in (the host's), prints
that port on one line, then enters the namespace at NETNS_PATH (`setns`, CLONE_NEWNET) and, for
every accepted connection, connects to 127.0.0.1:TARGET_PORT there and pumps bytes both ways
(one thread per direction; EOF is passed on as a half-close, an error tears down both sides).
The listening socket stays in the host namespace: a socket belongs to the namespace it was made
in. It bytes-forwards only, so TLS is end to end between the client and dockerd.

It exits when its parent dies (PR_SET_PDEATHSIG) or when WATCH_PID exits (the process that
holds the namespace: the second daemon's containerd), so it never outlives the engine.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1


def _libc_call(name: str, *args: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{name}: {os.strerror(errno)}")


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy src to dst until EOF (then half-close dst) or an error (then shut both down, which
    wakes the other direction's recv)."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _serve(client: socket.socket, target_port: int) -> None:
    try:
        upstream = socket.create_connection(("127.0.0.1", target_port), timeout=10)
    except OSError:  # the daemon is down (stopped by a test): the client sees the close
        client.close()
        return
    upstream.settimeout(None)
    for sock in (client, upstream):  # else each small exchange waits ~40 ms for a delayed ACK
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _exit_with(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        os._exit(0)
    select.select([fd], [], [])  # readable once the process has exited
    os._exit(0)


def main(argv: list[str]) -> int:
    netns, target_port = argv[0], int(argv[1])
    watch = int(argv[2]) if len(argv) > 2 else 0
    _libc_call("prctl", PR_SET_PDEATHSIG, int(signal.SIGTERM))
    if os.getppid() == 1:  # the parent died before prctl
        return 0
    listener = socket.create_server(("127.0.0.1", 0), backlog=128)
    fd = os.open(netns, os.O_RDONLY)
    _libc_call("setns", fd, CLONE_NEWNET)  # single-threaded still: every later socket is there
    os.close(fd)
    if watch:
        threading.Thread(target=_exit_with, args=(watch,), daemon=True).start()
    print(listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_serve, args=(client, target_port), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
