"""Issue 8 item 6: an agent cannot turn its own failure into an infrastructure error.

On 4a9ba26, `kill -TERM 1` or `kill -9 -1` from a command took the container down (PID 1 and its
sleep ran as the command's uid) and the attempt ended as SANDBOX_ERROR with a message saying a
command overran its deadline. Now PID 1 and the keeper run as another uid, which no command can
signal; a container that stops anyway raises SandboxExited (the core's AGENT_KILLED_SANDBOX),
with its state and an honest message, while an unreachable engine stays a plain SandboxError.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import pytest_agentbench.sandbox.port as ports
from pytest_agentbench.sandbox.port import SandboxError
from tests.support.sandboxes import MakeSandbox


def exited_type() -> type[BaseException]:
    exited = getattr(ports, "SandboxExited", None)
    assert exited is not None, "sandbox/port.py has no SandboxExited"
    return exited  # type: ignore[no-any-return]


@pytest.mark.parametrize("attack", [
    "kill -TERM 1", "kill -9 1", "kill -9 -1", "kill -STOP -1; kill -9 -1",
    "pkill -9 sleep; pkill -9 -f docker-init", "kill -9 -1 & kill -TERM 1; wait",
])
def test_commands_cannot_take_the_sandbox_down(make_docker_sandbox: MakeSandbox,
                                               attack: str) -> None:
    sandbox = make_docker_sandbox()
    result = sandbox.exec(attack, timeout_sec=30)
    assert not result.timed_out
    assert sandbox.exec("echo alive", timeout_sec=30).stdout == "alive\n"
    keeper = sandbox.exec("ps -o user=,args= -p 1; pgrep -u 0 -x sleep", timeout_sec=30).stdout
    assert keeper.split()[0] == "root" and keeper.strip().splitlines()[-1].isdigit()


def test_a_stopped_container_raises_sandbox_exited(make_docker_sandbox: MakeSandbox,
                                                   docker_sandboxes: Any) -> None:
    sandbox = make_docker_sandbox()
    docker_sandboxes.client.api.kill(sandbox.container_id)
    with pytest.raises(exited_type()) as caught:
        sandbox.exec("true", timeout_sec=30)
    exc: Any = caught.value
    assert exc.exit_code == 137 and not exc.oom_killed and not exc.expired
    assert "overran" not in str(exc)
    with pytest.raises(exited_type()):  # and again on every later call
        sandbox.exec("true", timeout_sec=30)


def test_death_during_a_command_is_not_called_an_overrun(make_docker_sandbox: MakeSandbox,
                                                         docker_sandboxes: Any) -> None:
    sandbox = make_docker_sandbox()
    killer = threading.Timer(1.5, docker_sandboxes.client.api.kill, [sandbox.container_id])
    killer.start()
    start = time.monotonic()
    try:
        with pytest.raises(exited_type()) as caught:
            sandbox.exec("sleep 20", timeout_sec=30)
    finally:
        killer.join()
    assert time.monotonic() - start < 15
    assert "overran" not in str(caught.value) and "exited" in str(caught.value)


def test_lifetime_expiry_is_sandbox_exited_and_expired(make_docker_sandbox: MakeSandbox) -> None:
    sandbox = make_docker_sandbox(lifetime_sec=1)
    time.sleep(2.5)
    with pytest.raises(exited_type()) as caught:
        sandbox.exec("true", timeout_sec=30)
    exc: Any = caught.value
    assert exc.expired and exc.exit_code == 0 and "lifetime" in str(exc)


def test_an_unreachable_engine_is_a_plain_sandbox_error(make_docker_sandbox: MakeSandbox,
                                                        tmp_path: Any) -> None:
    import docker

    sandbox = make_docker_sandbox()
    real = sandbox._api
    sandbox._api = docker.APIClient(base_url=f"unix://{tmp_path}/no-engine.sock", timeout=5,
                                    version="1.41")
    sandbox._drop_held()  # a lost engine takes the held wrapper shell's connection with it
    try:
        with pytest.raises(SandboxError) as caught:
            sandbox.exec("true", timeout_sec=30)
    finally:
        sandbox._api = real
    assert not isinstance(caught.value, exited_type())
