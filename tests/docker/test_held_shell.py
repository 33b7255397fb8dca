"""The held wrapper shell (sandbox/docker/held_shell.py): a command answered through it reads as the
same command run in an exec of its own, and it is used only where it may be.

Each case runs once through the held shell and once in an exec of its own, in the same sandbox, and
the two results must agree on the exit status, the output, the timeout and what the command
saw; the held shell must also have been used (or not) as the case says.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.sandbox.docker import held_shell
from tests.support.sandboxes import open_labelled, small_spec

pytestmark = pytest.mark.xdist_group("docker-held-shell")

CASES: list[tuple[str, dict[str, Any]]] = [
    ("echo hi; echo err >&2; exit 3", {}),
    ("printf 'no newline'", {}),
    ("cat; echo read-$?", {}),  # stdin: empty, as an exec's without one
    ("printf 'h\\303\\251llo\\n'; echo \"$FOO\"", {"env": {"FOO": "b\u00e4r  baz\n2"}}),
    ("pwd", {"cwd": "sub"}),
    ("head -c 300000 /dev/zero | tr '\\0' x; echo; echo done >&2", {}),
    ("sleep 3; echo late", {"timeout_sec": 1}),
    ("ulimit -f; ulimit -n; umask", {}),
    ("env | grep -c -e NONCE -e AGENTBENCH_ -e '^L=' -e '^envs=' || true", {}),
    ("sleep 100 & echo started", {}),
    ("cd / && cd - >/dev/null; pwd; echo \"${OLDPWD-none}\"", {"cwd": "sub"}),
    ("ps -o comm= -u \"$(id -u)\" | grep -c -e '^sleep' || true", {}),
    ("trap '' TERM HUP; echo $'\\036agentbench-out:0123\\n'; exit 1", {}),
]


def _run(sandbox: Any, command: str, hold: bool, **kw: Any) -> tuple[Any, bool]:
    sandbox.hold_shell = hold
    kw.setdefault("timeout_sec", 20)
    result = sandbox.exec(command, **kw)
    return result, sandbox._held is not None


@pytest.fixture
def sandbox(docker_sandboxes: Any, tmp_path: Path) -> Any:
    with open_labelled(docker_sandboxes, small_spec(tmp_path)) as make:
        box = make()
        (Path(box.spec.workspace) / "sub").mkdir()
        box.exec("true", timeout_sec=20)  # the image's shell checked
        assert box._private_shell, "the runner image has an execute-only shell"
        yield box


@pytest.mark.parametrize("command,kw", CASES, ids=[c[:30] for c, _ in CASES])
def test_the_held_shell_answers_as_an_exec_of_its_own(sandbox: Any, command: str,
                                             kw: dict[str, Any]) -> None:
    held, used = _run(sandbox, command, True, **kw)
    assert used, "the command went through the held shell"
    alone, used_after = _run(sandbox, command, False, **kw)
    assert not used_after, "an exec of its own ends the held shell (its reap)"
    for field in ("exit_code", "stdout", "stderr", "timed_out", "oom_killed", "output_lost"):
        assert getattr(held, field) == getattr(alone, field), field


def test_the_held_shell_is_reused_and_cheaper(sandbox: Any) -> None:
    sandbox.hold_shell = True
    sandbox.exec("true", timeout_sec=20)
    first = sandbox._held
    results = [sandbox.exec(f"echo {i}", timeout_sec=20) for i in range(50)]
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(50)]
    assert sandbox._held is first and first.requests >= 51


@pytest.mark.parametrize("env", [{"IFS": "x"}, {"BASH_ENV": "/tmp/x"}, {"lower": "1"},
                                 {"LC_ALL": "C"}, {"SHELLOPTS": "xtrace"}])
def test_an_environment_the_shell_reads_goes_to_an_exec_of_its_own(sandbox: Any,
                                                                  env: dict[str, str]) -> None:
    assert not held_shell.takes(env)
    sandbox.hold_shell = True
    sandbox.exec("true", timeout_sec=20)
    assert sandbox._held is not None
    result = sandbox.exec("echo ok", timeout_sec=20, env=env)
    assert result.exit_code == 0 and result.stdout == "ok\n"
    assert sandbox._held is None


def test_no_held_shell_without_the_execute_only_shell(docker_sandboxes: Any, tmp_path: Path,
                                                 plain_shell_image: str) -> None:
    with open_labelled(docker_sandboxes, small_spec(tmp_path)) as make:
        box = make(image=plain_shell_image)
        for _ in range(3):
            assert box.exec("echo x", timeout_sec=20).stdout == "x\n"
        assert not box._private_shell and box._held is None


def test_request_bytes_count_bytes_not_characters() -> None:
    data = held_shell.request_bytes("n0", ["\u00e9", "", "a\nb"], "/w", {"K": "\u00e4"})
    header, _, body = data.partition(b"\n")
    assert header == b"n0 2 0 3 2 4"
    assert body == "\u00e9a\nb/wK=\u00e4".encode()


def _held_pid(sandbox: Any) -> int:
    """The held shell's pid, found from outside (an exec the sandbox does not know of)."""
    api = sandbox._api
    exec_id = api.exec_create(sandbox.container_id, ["ps", "-o", "pid=,args=", "-u",
                                                     str(sandbox.uid)], user=sandbox.user)["Id"]
    lines = api.exec_start(exec_id).decode().splitlines()
    pids = [int(line.split()[0]) for line in lines if "agentbench-go" in line]
    assert len(pids) == 1, lines
    return pids[0]


def _signal_held_shell(sandbox: Any, signal: str) -> None:
    """A held shell started and idle, then `kill <signal>` to it from an exec the sandbox does
    not know of (as the pids limit, the OOM killer or a stray signal would come)."""
    sandbox.hold_shell = True
    sandbox.exec("true", timeout_sec=20)
    api = sandbox._api
    exec_id = api.exec_create(sandbox.container_id, ["kill", signal, str(_held_pid(sandbox))],
                              user=sandbox.user)["Id"]
    api.exec_start(exec_id)


def test_a_held_shell_that_ended_between_requests_runs_nothing_twice(sandbox: Any) -> None:
    """Killed while it waited (here from outside; the pids limit or the OOM killer could):
    the next request finds no GO mark, so it ran nowhere, and goes to an exec of its own."""
    _signal_held_shell(sandbox, "-9")
    result = sandbox.exec("echo once >> count.txt; cat count.txt", timeout_sec=20)
    assert result.exit_code == 0 and result.stdout == "once\n"
    assert sandbox._held_misses == 1
    assert sandbox.exec("echo again", timeout_sec=20).stdout == "again\n"
    assert sandbox._held is not None, "the next command starts another held shell"


def test_a_held_shell_stopped_between_requests_costs_seconds_not_the_command(sandbox: Any) -> None:
    """Stopped while it waited (from outside here): it takes no request, so after HELD_GO_SEC
    the host sends the command user's processes SIGCONT (between two commands nothing else of
    that user runs) and the shell goes on: the command runs once, without waiting out its
    deadline, and nothing is killed (under load a slow GO mark is no reason to kill)."""
    from pytest_agentbench.sandbox.docker.sandbox import HELD_GO_SEC

    _signal_held_shell(sandbox, "-STOP")
    started = time.monotonic()
    result = sandbox.exec("echo once >> stopped.txt; cat stopped.txt", timeout_sec=20)
    assert result.exit_code == 0 and result.stdout == "once\n" and not result.timed_out
    assert HELD_GO_SEC <= time.monotonic() - started < HELD_GO_SEC + 5
    assert sandbox.exec("echo again", timeout_sec=20).stdout == "again\n"
