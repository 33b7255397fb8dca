"""Issue 20 item 8: Ctrl-C was lost. A shell without job control (a script's `pytest ... &`,
some CI steps, `scripts/test` started in the background) runs a job with SIGINT ignored, and
Python keeps an inherited SIG_IGN: the run ignored Ctrl-C and `kill -INT`, ran every attempt to
its end and exited 0 (the reviewer's three Ctrl-C runs; the same made three sandbox-contract
interrupts wait out their 30 s). A run that owns containers now always stops on SIGINT: exit 2
(interrupted), promptly, no container left.

Real runs of the bundled suite in Docker sandboxes, started with SIGINT ignored (`trap '' INT`,
which an exec keeps), signalled once their first sandbox is up: the whole process group as a
terminal's Ctrl-C does under xdist, the pytest process alone without it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.plugin_runs import (
    PluginRunner,
    containers_of,
    first_containers,
    python_m_pytest,
)

PROMPT_SEC = 60  # from SIGINT to exit, on a loaded machine (it takes a few seconds)
IGNORING_SIGINT = ["sh", "-c", "trap '' INT; exec \"$@\"", "sh"]


def test_the_wrapper_starts_a_program_with_sigint_ignored() -> None:
    status = subprocess.run([*IGNORING_SIGINT, "cat", "/proc/self/status"], check=True,
                            capture_output=True, text=True).stdout
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:"))
    assert int(mask, 16) & (1 << (signal.SIGINT - 1))


@pytest.mark.parametrize(("extra", "whole_group"), [(("-n", "2"), True), ((), False)],
                         ids=["xdist-terminal-ctrl-c", "serial-kill-int"])
def test_a_run_started_with_sigint_ignored_stops_on_sigint(
    docker_sandboxes: Any, tmp_path: Path, extra: tuple[str, ...], whole_group: bool,
) -> None:
    client = docker_sandboxes.client
    workspace = PluginRunner(tmp_path)
    args = workspace.args(*extra, "-k", "mean or slug or size")
    proc = subprocess.Popen([*IGNORING_SIGINT, *python_m_pytest(args)], cwd=workspace.root,
                            env=workspace.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    run_id, took, output = None, 0.0, ""
    try:
        run_id, seen = first_containers(workspace.out, client, proc, 240)
        assert seen, "no sandbox container appeared before the run ended"
        sent = time.monotonic()
        if whole_group:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            output = proc.communicate(timeout=PROMPT_SEC)[0]
        took = time.monotonic() - sent
        assert proc.poll() is not None, f"still running {PROMPT_SEC}s after SIGINT"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for container in containers_of(client, run_id) if run_id else []:
            with contextlib.suppress(Exception):
                client.api.remove_container(container, force=True, v=True)
    assert proc.returncode == 2, (proc.returncode, output[-3000:])  # pytest's INTERRUPTED
    assert "KeyboardInterrupt" in output and "Traceback" not in output, output[-3000:]
    assert run_id is not None and containers_of(client, run_id) == [], output[-3000:]
    assert took < PROMPT_SEC


def test_the_run_takes_back_an_ignored_sigint_and_restores_it() -> None:
    """In process: an inherited SIG_IGN becomes Python's KeyboardInterrupt for the run and is
    put back at its end (an in-process pytester run leaks nothing); someone's handler stays."""
    from pytest_agentbench.run.sigterm import restore_sigterm, sigterm_as_interrupt

    before = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sigterm_as_interrupt()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        restore_sigterm()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN

        def mine(signum: int, frame: object) -> None:
            pass

        signal.signal(signal.SIGINT, mine)
        sigterm_as_interrupt()
        assert signal.getsignal(signal.SIGINT) is mine
        restore_sigterm()
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, before)
        restore_sigterm()


EARLY_PROBE = """
import os, signal, sys
import pytest

class Probe:  # pytest captures the output from here on: the answer goes to a file
    @pytest.hookimpl(trylast=True)
    def pytest_load_initial_conftests(self):
        taken = signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with open(os.environ["SIGINT_PROBE"], "w") as out:
            out.write(f"sigint taken before conftests: {taken}")

sys.exit(pytest.main(sys.argv[1:], plugins=[Probe()]))
"""


def test_a_run_takes_sigint_before_conftests_and_plugins_load(tmp_path: Path) -> None:
    """The window where an inherited SIG_IGN still holds ends at the first hook that knows a
    run is asked for (plugin/entry.py), not at pytest_configure after every plugin loaded."""
    workspace = PluginRunner(tmp_path)
    answer = tmp_path / "answer"
    proc = subprocess.run([*IGNORING_SIGINT, sys.executable, "-c", EARLY_PROBE,
                           *workspace.args("--collect-only", "-q")], cwd=workspace.root,
                          env={**workspace.env(), "SIGINT_PROBE": str(answer)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert answer.read_text() == "sigint taken before conftests: True"
