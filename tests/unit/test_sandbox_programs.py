"""How a command agent's program run records its remote model relay (core/sandbox_programs.py),
with a sandbox whose held-open process is one end of a socket pair: a transport closed by a
malformed frame is in meta/environment.json and a `gateway_transport` note, and the program
still runs to its end; a relay that never says READY ends the attempt as a sandbox failure, in
one line with the relay's own words."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pytest_agentbench.agents.port import GatewayLink
from pytest_agentbench.core.attempt import Attempt
from pytest_agentbench.core.sandbox_programs import SandboxPrograms
from pytest_agentbench.gateway.tunnel_relay import READY, encode
from pytest_agentbench.sandbox.port import ExecResult, SandboxError


class _Channel:
    def __init__(self, sock: socket.socket, stderr: str) -> None:
        self.sock, self.stderr = sock, stderr

    def recv(self, size: int) -> bytes:
        return self.sock.recv(size)

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def stderr_tail(self) -> str:
        return self.stderr


class _RemoteSandbox:
    """An Attaching sandbox: `attach` hands out a socket pair whose far end sends `frames`,
    then `later` while the program runs."""

    sees_host_files = False

    def __init__(self, frames: bytes, stderr: str = "", later: bytes = b"") -> None:
        self.frames, self.stderr, self.later = frames, stderr, later
        self.commands: list[str] = []
        self.argv: list[list[str]] = []
        self.far: socket.socket | None = None

    def attach(self, argv: list[str], *, env: Mapping[str, str] | None = None) -> _Channel:
        self.argv.append(argv)
        near, self.far = socket.socketpair()
        self.far.sendall(self.frames)
        return _Channel(near, self.stderr)

    def exec(self, command: str, *, timeout_sec: float, env: Any = None, cwd: Any = None,
             full_output: bool = False) -> ExecResult:
        self.commands.append(command)
        assert self.far is not None
        self.far.sendall(self.later)
        threading.Event().wait(0.3)  # the program runs a while
        return ExecResult(0, "ran\n", "", 300)


def _attempt(tmp_path: Path) -> tuple[Attempt, list[Any]]:
    emitted: list[Any] = []

    def run_command(sandbox: Any, phase: str, command: str, timeout: float,
                    log: str | None = None, env: dict[str, str] | None = None) -> Any:
        return sandbox.exec(command, timeout_sec=timeout, env=env)

    (tmp_path / "logs").mkdir()
    at = SimpleNamespace(run_command=run_command, environment={},
                         paths=SimpleNamespace(log=(tmp_path / "logs").joinpath),
                         cfg=SimpleNamespace(redact=str), events=SimpleNamespace(
                             emit=emitted.append))
    return cast(Attempt, at), emitted


def test_a_malformed_frame_is_recorded_and_the_program_still_ends(tmp_path: Path) -> None:
    sandbox = _RemoteSandbox(encode(READY, 0), stderr="relay said something\n",
                             later=struct.pack(">BII", 2, 1, 5) + b"evil!")
    at, emitted = _attempt(tmp_path)
    result = SandboxPrograms(at, cast(Any, sandbox)).run(
        "my-agent --go", env={}, timeout_sec=60, gateway=GatewayLink(8089, tmp_path / "gw.sock"))
    assert result.exit_code == 0 and sandbox.commands == ["exec sh -c 'my-agent --go'"]
    assert sandbox.argv[0][:4] == ["python3", "-I", "-S", "-c"] and sandbox.argv[0][-1] == "8089"
    transport = at.environment["gateway_transport"]
    assert transport["kind"] == "exec" and "OPEN frame with 5 bytes" in transport["problem"]
    (note,) = emitted
    assert note.kind == "gateway_transport" and "malformed frame" in note.message
    assert (tmp_path / "logs" / "gateway_relay_stderr.txt").read_text() == \
        "relay said something\n"


def test_a_relay_that_never_listens_fails_the_sandbox_in_one_line(tmp_path: Path) -> None:
    sandbox = _RemoteSandbox(b"", stderr="relay: cannot listen on 127.0.0.1:8089: in use\n")
    at, _ = _attempt(tmp_path)
    programs = SandboxPrograms(at, cast(Any, sandbox))
    assert sandbox.far is None
    with pytest.raises(SandboxError) as caught:
        threading.Timer(0.2, lambda: sandbox.far.close() if sandbox.far else None).start()
        programs.run("my-agent", env={}, timeout_sec=60,
                     gateway=GatewayLink(8089, tmp_path / "gw.sock"))
    message = str(caught.value)
    assert "\n" not in message and "the model relay did not start" in message
    assert "the sandbox's relay ended" in message and "cannot listen" in message
    assert sandbox.commands == []  # the program never started
