"""The model relay inside a sandbox: 127.0.0.1:PORT there, the attempt's gateway socket here.

Run by the sandbox's own Python, standard library only, as a file copied beside the socket
(`python3 relay.py PORT SOCKET -- COMMAND...`): it listens on the sandbox's loopback, starts
COMMAND (the agent program) once it listens, forwards every connection's bytes to the Unix
socket and back, and exits with COMMAND's status. The sandbox has no network: the socket, which
answers only the attempt's token and only model calls, is the one way out. An agent configured
with `OPENAI_BASE_URL=http://127.0.0.1:PORT/v1` works unchanged.
"""

import contextlib
import os
import socket
import subprocess
import sys
import threading

BUFFER = 65536


def pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(BUFFER)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                sock.shutdown(how)


def serve(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def accept(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve, args=(client, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: relay.py PORT SOCKET -- COMMAND...\n")
        return 2
    port, path, command = int(argv[0]), argv[1], argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=accept, args=(listener, path), daemon=True).start()
    return subprocess.call(command, env=os.environ.copy())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
