"""A command agent's way to the model is the same on every kind of sandbox (issue 23 item 2):
a program given a GatewayLink (core/sandbox_programs.py) reaches a Unix socket on this host at
127.0.0.1:PORT from inside, whether the socket's directory is there (local), bind-mounted
(docker) or cannot be (docker-archive, remote: the relay is held open by an exec), and the
program's own directory is there (read-only to it in a container)."""

from __future__ import annotations

import shutil
import socket
import socketserver
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pytest_agentbench.agents.port import GatewayLink
from pytest_agentbench.core.attempt import Attempt
from pytest_agentbench.core.sandbox_programs import SandboxPrograms
from pytest_agentbench.sandbox.port import ExtraMount, Sandbox
from tests.support.sandboxes import MakeSandbox

CLIENT = ("import os, urllib.request; port = os.environ['PORT']; "
          "print(urllib.request.urlopen(f'http://127.0.0.1:{port}/v1/ping', timeout=30)"
          ".read().decode()); print(open(os.environ['AGENTBENCH_PROGRAM_DIR'] + '/tool.txt')"
          ".read().strip())")


def free_port() -> int:
    """A port nothing on this host's loopback listens on now (a random pick may be in use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = f"gateway saw {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


@pytest.fixture
def gateway_socket() -> Iterator[Path]:
    short = Path(tempfile.mkdtemp(prefix="ab-gwc-"))  # a socket's path: at most 107 bytes
    short.chmod(0o755)
    server = _Server(str(short / "gateway.sock"), _Answer)
    (short / "gateway.sock").chmod(0o666)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                     daemon=True).start()
    yield short / "gateway.sock"
    server.shutdown()
    server.server_close()
    shutil.rmtree(short, ignore_errors=True)


def _attempt(tmp_path: Path) -> Attempt:
    """What SandboxPrograms uses of an attempt: run_command, the environment, logs, events."""
    def run_command(sandbox: Sandbox, phase: str, command: str, timeout: float,
                    log: str | None = None, env: dict[str, str] | None = None) -> Any:
        return sandbox.exec(command, timeout_sec=timeout, env=env)

    logs = tmp_path / "logs"
    logs.mkdir()
    return cast(Attempt, SimpleNamespace(
        run_command=run_command, environment={}, paths=SimpleNamespace(log=logs.joinpath),
        cfg=SimpleNamespace(redact=str), events=SimpleNamespace(emit=lambda event: None)))


def test_a_program_reaches_the_gateway_socket_at_the_same_loopback_address(
        make_sandbox: MakeSandbox, tmp_path: Path, gateway_socket: Path) -> None:
    program = tmp_path / "program"
    program.mkdir()
    (program / "tool.txt").write_text("the program's own file\n")
    port = free_port()  # the local sandbox shares this host's loopback
    sandbox = make_sandbox(extra_mounts=(
        ExtraMount(gateway_socket.parent, "/run/agentbench/gateway", "AGENTBENCH_GATEWAY_DIR"),
        ExtraMount(program, "/opt/agentbench/program", "AGENTBENCH_PROGRAM_DIR")))
    at = _attempt(tmp_path)
    result = SandboxPrograms(at, sandbox).run(
        f"python3 -c {CLIENT!r} && {{ ( : > \"$AGENTBENCH_PROGRAM_DIR/planted\" ) 2>/dev/null "
        "&& echo written || echo refused; }",
        env={"PORT": str(port)}, timeout_sec=120, gateway=GatewayLink(port, gateway_socket))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    lines = result.stdout.splitlines()
    assert lines[:2] == ["gateway saw /v1/ping", "the program's own file"], lines
    if sandbox.facts()["sandbox"] == "docker":  # the local sandbox isolates nothing
        assert lines[2] == "refused"
    if not getattr(sandbox, "sees_host_files", True):
        transport = at.environment["gateway_transport"]
        assert (transport["streams"], transport["problem"]) == (1, None), transport
