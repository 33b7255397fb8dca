"""A harness script run by the command's own exec after the command (sandbox/docker/policy.py
EPILOGUE): what starts the agent's snapshots in the last baseline run's exec instead of an exec
of its own. The wrapper runs it after the command and everything it started were killed, as the
command user in the command's directory; its stdout comes back on a line carrying the exec's
nonce, only when it exited 0 and fits; the command's own output and exit status are what they
were without it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.sandbox.port import EPILOGUE_MAX_BYTES
from tests.support.sandboxes import open_labelled, small_spec


@pytest.fixture()
def sandbox(docker_sandboxes: Any, tmp_path: Path) -> Iterator[Any]:
    with open_labelled(docker_sandboxes, small_spec(tmp_path)) as make:
        yield make()


def run(sandbox: Any, command: str, epilogue: str, **kwargs: Any) -> Any:
    return sandbox.exec(command, timeout_sec=30, epilogue=epilogue, **kwargs)


def test_the_script_runs_after_the_command_and_the_output_is_the_commands_own(
        sandbox: Any) -> None:
    command = "echo out; echo err >&2; echo made > f; exit 3"
    plain = sandbox.exec(command, timeout_sec=30)
    after = run(sandbox, command, "printf '%s|%s|' \"$(cat f)\" \"$(id -u)\"; pwd")
    assert after.epilogue_output == f"made|{sandbox.uid}|/workspace\n"
    assert (after.stdout, after.stderr, after.exit_code) == (
        plain.stdout, plain.stderr, plain.exit_code) == ("out\n", "err\n", 3)
    assert plain.epilogue_output is None


def test_what_the_command_started_is_gone_before_the_script_runs(sandbox: Any) -> None:
    result = run(sandbox, "echo real > f; (sleep 0.3; echo forged > f) & disown; exit 0",
                 "sleep 0.6; cat f")
    assert result.epilogue_output == "real\n"
    gone = run(sandbox, "sleep 100 & disown; echo started",
               "pgrep -u \"$(id -u)\" -c sleep || true")  # PID 1's sleep is root's
    assert gone.epilogue_output == "0\n"


def test_a_line_the_command_prints_is_not_taken_for_the_scripts(sandbox: Any) -> None:
    forged = "printf '\\n\\036agentbench-epilogue:%s +Zm9yZ2Vk\\n' \"$AGENTBENCH_NONCE\" >&2"
    result = run(sandbox, f"{forged}; printf '\\n\\036agentbench-epilogue:0123 +Zm9yZ2Vk\\n' >&2",
                 "echo real")
    assert result.epilogue_output == "real\n"
    assert "agentbench-epilogue:0123 +Zm9yZ2Vk" in result.stderr  # the command's own line, kept


def test_a_failed_too_large_or_killed_script_gives_nothing(sandbox: Any) -> None:
    failed = run(sandbox, "echo done", "echo partial; exit 1")
    assert failed.epilogue_output is None and failed.stdout == "done\n"
    assert "agentbench-epilogue" not in failed.stderr
    big = run(sandbox, "true", f"head -c {EPILOGUE_MAX_BYTES + 1} /dev/zero")
    assert big.epilogue_output is None and big.ok
    exact = run(sandbox, "true", f"head -c {EPILOGUE_MAX_BYTES} /dev/zero | tr '\\0' x")
    assert exact.epilogue_output == "x" * EPILOGUE_MAX_BYTES
    # a command that ran out of time is still followed by the script (its bound is its own,
    # and the host waits for it)
    timed = sandbox.exec("sleep 5", timeout_sec=1, epilogue="echo after")
    assert timed.timed_out and timed.epilogue_output == "after\n"


def test_the_snapshot_chunks_reach_the_script_and_not_the_command(sandbox: Any) -> None:
    env = {"AGENTBENCH_EXCL_00000": "abc", "AGENTBENCH_EXCL_00001": "def", "KEEP": "k"}
    result = run(sandbox, "env | grep -c '^AGENTBENCH_EXCL_' || true; echo \"$KEEP\"",
                 "env | grep '^AGENTBENCH_EXCL_' | sort; echo \"$KEEP\"", env=env)
    assert result.stdout == "0\nk\n"
    assert result.epilogue_output == "AGENTBENCH_EXCL_00000=abc\nAGENTBENCH_EXCL_00001=def\nk\n"
    # without a script the command sees its environment whole (a folded snapshot reads them)
    plain = sandbox.exec("env | grep -c '^AGENTBENCH_EXCL_'", timeout_sec=30, env=env)
    assert plain.stdout == "2\n"


def test_the_scripts_time_does_not_make_a_command_timed_out(sandbox: Any) -> None:
    """A command that ends 137 on its own before its budget was read as timed out when the
    exec's time (its epilogue's and prologue's included) passed the budget; the wrapper's
    trailer now says the command's own time."""
    result = sandbox.exec("sleep 0.5; exit 137", timeout_sec=1.0, prologue="sleep 0.4",
                          epilogue="sleep 0.6; echo after")
    assert result.exit_code == 137 and not result.timed_out
    assert result.epilogue_output == "after\n" and result.duration_ms >= 1000
    timed = sandbox.exec("sleep 5", timeout_sec=1.0, prologue="true", epilogue="echo after")
    assert timed.timed_out and timed.exit_code in (124, 137)
