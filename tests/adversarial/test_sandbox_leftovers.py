"""Issue 8 item 8b: no process a command starts outlives it, whatever it does.

On 4a9ba26 the reaper went by a marker in the environment: `setsid env -i sleep 1000 &` escaped
it and kept running into later calls (and could keep writing to the workspace between them). Now
every process of the command user in the container is killed when a command ends (kill -1 from
the wrapper, and from the host when the wrapper is gone), so exec is serialized per sandbox.
"""

from __future__ import annotations

import time

import pytest

from tests.support.sandboxes import MakeSandbox

LINGER = "cp /bin/sleep /tmp/lingerer && "  # a process name no harness process has

QUIET = " </dev/null >/dev/null 2>&1"
ESCAPES = {
    "setsid-env-i": f"setsid env -i /tmp/lingerer 1000 {QUIET} &",
    "double-fork": f"( ( /tmp/lingerer 1000 {QUIET} & ) & )",
    "nohup": f"nohup /tmp/lingerer 1000 {QUIET} &",
    "setsid-f-ignoring-signals":
        f"setsid -f env -i bash -c 'trap \"\" TERM HUP INT; /tmp/lingerer 1000' {QUIET}",
    "stopped": f"env -i /tmp/lingerer 1000 {QUIET} & sleep 0.2; kill -STOP $!",
    "disowned-in-new-group": f"set -m; env -i /tmp/lingerer 1000 {QUIET} & disown",
    "python-daemon": "env -i python3 -c 'import os, sys\nif os.fork(): sys.exit()\nos.setsid()\n"
                     "if os.fork(): sys.exit()\nos.execv(\"/tmp/lingerer\", [\"lingerer\", "
                     f"\"1000\"])' {QUIET}",
    "wrapper-killed-first":
        f"setsid -f /tmp/lingerer 1000 {QUIET}; sleep 0.5; kill -9 $(ps -o ppid= -p $PPID)",
}


@pytest.mark.parametrize("escape", ESCAPES.values(), ids=ESCAPES.keys())
def test_nothing_survives_the_command(make_docker_sandbox: MakeSandbox, escape: str) -> None:
    sandbox = make_docker_sandbox()
    started = sandbox.exec(f"{LINGER}{escape}\nsleep 0.5; pgrep -x lingerer", timeout_sec=30)
    assert started.stdout.strip(), started.stderr  # it ran, and is running as the command ends
    probe = sandbox.exec("pgrep -x lingerer || echo none", timeout_sec=30)
    assert probe.stdout == "none\n"


def test_a_leftover_cannot_write_to_the_workspace_between_calls(
    make_docker_sandbox: MakeSandbox,
) -> None:
    sandbox = make_docker_sandbox()
    late = f"setsid env -i bash -c 'sleep 1; echo late > late.txt' {QUIET} & sleep 0.5"
    assert sandbox.exec(late, timeout_sec=30).exit_code == 0
    time.sleep(2.5)  # the host-side tools read the workspace meanwhile
    assert not (sandbox.spec.workspace / "late.txt").exists()


def test_a_timed_out_command_leaves_nothing_either(make_docker_sandbox: MakeSandbox) -> None:
    sandbox = make_docker_sandbox()
    result = sandbox.exec(LINGER + f"setsid env -i /tmp/lingerer 1000 {QUIET} & sleep 60",
                          timeout_sec=1)
    assert result.timed_out
    assert sandbox.exec("pgrep -x lingerer || echo none", timeout_sec=30).stdout == "none\n"
