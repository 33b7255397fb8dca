"""Issue 8 item 8b: no process a command starts outlives it, whatever it does.

On 4a9ba26 the reaper went by a marker in the environment: `setsid env -i sleep 1000 &` escaped
it and kept running into later calls (and could keep writing to the workspace between them). Now
every process of the command user in the container is killed when a command ends (kill -1 from
the wrapper, and from the host when the wrapper is gone), so exec is serialized per sandbox.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
import uuid
from pathlib import Path
from typing import Any

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


def test_the_run_end_removes_a_checkout_a_leftover_container_still_writes_to(
    docker_sandboxes: Any, tmp_path: Path
) -> None:
    """A worker killed mid-attempt (xdist gives it 10 s after Ctrl-C) leaves its container
    running, still writing into the bind-mounted checkout (a baseline's __pycache__). On
    515bbc0 the run's end removed the work directories before sweeping the containers, the
    removal failed on the growing tree, and a checkout was left behind (CI, once in 1,535)."""
    from pytest_agentbench.run.finish import end_run
    from pytest_agentbench.run.hostenv import work_root
    from pytest_agentbench.run.state import RunState
    from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE
    from pytest_agentbench.text.redaction import Redactor

    run_id = f"leftover-writer-{uuid.uuid4().hex[:8]}"
    checkout = work_root(run_id, "t") / "task_variant_0@t"
    checkout.mkdir(parents=True)
    checkout.chmod(0o777)
    writer = "i=0; while :; do i=$((i+1)); mkdir -p d/$i/e; : > d/$i/e/f; done"
    client = docker_sandboxes.client
    container = client.containers.run(
        DEFAULT_IMAGE, ["bash", "-c", writer], detach=True, working_dir="/w",
        volumes={str(checkout): {"bind": "/w", "mode": "rw"}},
        # a live run's, as its sandboxes are: a doctor or gc beside this test must spare it
        labels={"agentbench": "1", "agentbench.run_id": run_id, "agentbench.session": "t",
                "agentbench.owner": f"{socket.gethostname()}:{os.getpid()}"},
    )
    try:
        deadline = time.monotonic() + 30
        while not (checkout / "d" / "50").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (checkout / "d" / "50").exists(), "the writer never started"
        state = RunState(run_id=run_id, run_dir=str(tmp_path / "run"), config_hash="x",
                         session_token="t")
        (tmp_path / "run").mkdir()
        errors = end_run(state, Redactor(), docker=True)
        assert [e for e in errors if e.startswith(("sweep", "remove"))] == []
        assert not work_root(run_id, "t").exists()
        assert docker_sandboxes.containers({"agentbench.run_id": run_id}) == []
    finally:
        with contextlib.suppress(Exception):
            container.remove(force=True)
        shutil.rmtree(work_root(run_id), ignore_errors=True)
