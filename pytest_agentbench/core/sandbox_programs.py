"""A command agent's program in its sandbox (agents.port.Programs), and the relay that takes
its model calls to the attempt's gateway.

The program is a harness command of the agent phase: its output in
logs/agent_program_{stdout,stderr}.txt and a `command_finished` event. With a GatewayLink a relay
listens on the sandbox's loopback (127.0.0.1:PORT, the same for every engine, so an agent is
configured the same way) before the program starts:

- an engine that sees this host's files: the gateway's directory is mounted, and the stdlib
  relay (gateway/relay.py, copied beside the socket) forwards each connection to the socket and
  starts the program;
- an engine that does not (transfer archive): the sandbox starts gateway/tunnel_relay.py by an
  exec the harness holds open (sandbox.port.Attaching) and gateway/tunnel.TunnelPump carries its
  frames to the socket, here. The transport's streams and any problem (a malformed frame closes
  it) are in meta/environment.json (`gateway_transport`) and a `note` event.
"""

from __future__ import annotations

import shlex
import shutil
import time
from importlib import resources

from pytest_agentbench.agents.port import GatewayLink, ProgramResult
from pytest_agentbench.core.attempt import Attempt
from pytest_agentbench.gateway.tunnel import TunnelPump, relay_argv
from pytest_agentbench.sandbox.port import Attaching, Sandbox, SandboxError
from pytest_agentbench.schemas.events import Note

RELAY_NAME = "relay.py"
READY_TIMEOUT_SEC = 30.0


class SandboxPrograms:
    def __init__(self, at: Attempt, sandbox: Sandbox) -> None:
        self.at, self.sandbox = at, sandbox

    def run(self, command: str, *, env: dict[str, str], timeout_sec: float,
            gateway: GatewayLink | None = None) -> ProgramResult:
        if gateway is None:
            return self._run(command, env, timeout_sec)
        if isinstance(self.sandbox, Attaching) and not self.sandbox.sees_host_files:
            return self._tunnelled(self.sandbox, command, env, timeout_sec, gateway)
        with resources.as_file(resources.files("pytest_agentbench.gateway") / RELAY_NAME) as src:
            shutil.copyfile(src, gateway.socket.parent / RELAY_NAME)
        self.at.environment["gateway_transport"] = {"kind": "mounted_socket"}
        relayed = (f'exec python3 "$AGENTBENCH_GATEWAY_DIR/{RELAY_NAME}" {gateway.port} '
                   f'"$AGENTBENCH_GATEWAY_DIR/{gateway.socket.name}" -- '
                   f"sh -c {shlex.quote(command)}")
        return self._run(relayed, env, timeout_sec)

    def _tunnelled(self, sandbox: Attaching, command: str, env: dict[str, str],
                   timeout_sec: float, gateway: GatewayLink) -> ProgramResult:
        started = time.monotonic()
        channel = sandbox.attach(relay_argv(gateway.port))
        pump = TunnelPump(channel, gateway.socket).start()
        try:
            if not pump.wait_ready(READY_TIMEOUT_SEC):
                tail = " | ".join(channel.stderr_tail().strip().splitlines()[-3:])[-300:]
                raise SandboxError(
                    "the model relay did not start in the sandbox: "
                    f"{pump.problem or f'no answer in {READY_TIMEOUT_SEC:g} s'}"
                    f"{f' ({tail})' if tail else ''}")
            left = timeout_sec - (time.monotonic() - started)
            return self._run(f"exec sh -c {shlex.quote(command)}", env, left)
        finally:
            pump.close()
            self._record(pump, channel.stderr_tail())

    def _record(self, pump: TunnelPump, stderr: str) -> None:
        stats = {"kind": "exec", **pump.stats}
        self.at.environment["gateway_transport"] = stats
        if stderr:
            self.at.paths.log("gateway_relay_stderr.txt").write_text(
                self.at.cfg.redact(stderr), "utf-8")
        if pump.problem is not None:
            self.at.events.emit(Note(kind="gateway_transport", message=(
                f"the model relay's transport closed: {pump.problem}")[:500], data=stats))

    def _run(self, command: str, env: dict[str, str], timeout_sec: float) -> ProgramResult:
        result = self.at.run_command(self.sandbox, "agent", command, timeout_sec,
                                     log="agent_program", env=env)
        return ProgramResult(result.exit_code, result.full_stdout or result.stdout,
                             result.full_stderr or result.stderr, result.timed_out,
                             result.duration_ms)

    def read(self, path: str, max_bytes: int) -> bytes | None:
        result = self.sandbox.exec(f"test -f {shlex.quote(path)} && head -c {int(max_bytes)} -- "
                                   f"{shlex.quote(path)}", timeout_sec=30, full_output=True)
        if result.exit_code != 0:
            return None
        return (result.full_stdout or result.stdout).encode()
