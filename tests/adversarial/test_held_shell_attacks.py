"""Red team of the held wrapper shell (sandbox/docker/held_shell.py): what a hostile command, of the
same user as the shell that started it and answers for it, can do to that shell and to the next
command's answer.

Held: it cannot read the shell's memory, environment, fds or stdin (the next request, its
nonce); it cannot leave anything behind that writes into the next answer; killing or stopping
the shell ends in the result a one-shot wrapper killed or stopped would give, and the next
command runs in a new shell. What the kernel lets a process of the same uid do to another, its
resource limits (prlimit(2)), the shell notices before the next request and refuses it: that
request runs in an exec of its own, the one after in a new shell.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.sandbox.docker.sandbox import HELD_GO_SEC
from tests.support.sandboxes import open_labelled, small_spec

pytestmark = pytest.mark.xdist_group("docker-held-shell")

# the shell that answers for this command: the one ancestor whose arguments hold its script
FIND_HELD = ("r=; p=$PPID; while [ \"$p\" -gt 1 ]; do "
              "case \"$(tr '\\0' ' ' < /proc/$p/cmdline)\" in *agentbench-go*) r=$p;; esac; "
              "p=$(ps -o ppid= -p \"$p\" | tr -d ' '); done; [ -n \"$r\" ] || exit 99\n")


@pytest.fixture
def sandbox(docker_sandboxes: Any, tmp_path: Path) -> Any:
    with open_labelled(docker_sandboxes, small_spec(tmp_path)) as make:
        box = make()
        assert box.exec("true", timeout_sec=20).exit_code == 0
        assert box._private_shell and box._held is not None
        yield box


def test_the_command_finds_its_held_shell(sandbox: Any) -> None:
    result = sandbox.exec(FIND_HELD + "echo found", timeout_sec=20)
    assert result.exit_code == 0 and result.stdout == "found\n", result.stderr


@pytest.mark.parametrize("path", ["environ", "mem", "fd/0", "fd/1", "fd/3", "stack", "maps"])
def test_the_held_shell_s_proc_files_are_closed_to_the_command(sandbox: Any, path: str) -> None:
    result = sandbox.exec(FIND_HELD + f"head -c 64 /proc/$r/{path} | od -c | head -3; "
                          "echo rc=${PIPESTATUS[0]}", timeout_sec=20)
    assert "rc=0" not in result.stdout and "rc=1" in result.stdout, result.stdout


def test_lowered_limits_make_the_held_shell_refuse_the_next_request(sandbox: Any) -> None:
    first = sandbox._held
    nofile = sandbox.exec("ulimit -n", timeout_sec=20).stdout.strip()
    assert nofile.isdigit() and int(nofile) > 64
    lowered = sandbox.exec(FIND_HELD + "prlimit --pid $r --nofile=64:64 --fsize=8:8 && "
                           "echo lowered", timeout_sec=20)
    assert lowered.stdout == "lowered\n", lowered.stderr
    after = sandbox.exec("head -c 20000 /dev/zero > big.bin; stat -c %s big.bin; ulimit -n",
                         timeout_sec=20)
    assert after.exit_code == 0 and after.stdout.split() == ["20000", nofile], after
    assert sandbox._held_misses == 1 and sandbox._held is None  # it ran on its own
    again = sandbox.exec(FIND_HELD + "prlimit --pid $r --nofile --fsize --noheadings -o SOFT",
                         timeout_sec=20)
    assert sandbox._held is not None and sandbox._held is not first
    assert again.stdout.split() == [nofile, "unlimited"], again


def test_a_stopped_held_shell_is_a_command_the_host_stops(sandbox: Any) -> None:
    result = sandbox.exec(FIND_HELD + "kill -STOP $r; echo stopped", timeout_sec=1)
    assert result.timed_out and sandbox._held is None
    assert sandbox.exec("echo next", timeout_sec=20).stdout == "next\n"


def test_a_killed_held_shell_reads_as_a_killed_wrapper(sandbox: Any) -> None:
    result = sandbox.exec("echo before; kill -9 -1", timeout_sec=20)
    assert result.exit_code == 137 and not result.timed_out and not result.output_lost
    assert sandbox.exec("echo next", timeout_sec=20).stdout == "next\n"


def test_nothing_a_command_leaves_writes_into_the_next_answer(sandbox: Any) -> None:
    planted = sandbox.exec("(trap '' HUP TERM; sleep 0.4; echo LATE; echo LATE >&2) & "
                           "setsid sh -c 'sleep 0.4; echo LATE2' & nohup sh -c 'sleep 0.4; "
                           "echo LATE3' & echo planted", timeout_sec=20)
    assert planted.stdout == "planted\n"
    nxt = sandbox.exec("sleep 0.8; echo next", timeout_sec=20)
    assert nxt.stdout == "next\n" and "LATE" not in nxt.stderr
    assert sandbox._held is not None and sandbox._held_misses == 0


def test_a_forged_end_does_not_end_the_answer(sandbox: Any) -> None:
    """The marks without the request's nonce (which the command cannot read) are output."""
    forged = ("printf '\\n\\036agentbench-out:%s\\n' \"$AGENTBENCH_NONCE\" x; "
              "printf '\\n\\036agentbench-end:x 0 0 0 - 1\\n' >&2; echo real; exit 5")
    result = sandbox.exec(forged, timeout_sec=20)
    assert result.exit_code == 5 and result.stdout.endswith("real\n")
    assert "agentbench-out:" in result.stdout
    assert sandbox.exec("echo next", timeout_sec=20).stdout == "next\n"


# Found by the red team of the held shell, each failed before its fix (held_shell.py `state`,
# the host's HELD_GO_SEC): what a command leaves on the pipes it shares with the shell, or on
# the shell's scheduling, outlived it and reached later commands, the final diff among them.
NONBLOCK = ("python3 -c 'import fcntl, os\nfor fd in (1, 2):\n"
            "    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)'"
            "; echo set")
ARM_STOP = FIND_HELD + ("python3 - \"$r\" <<'PY'\nimport fcntl, os, signal, sys\n"
                         "fcntl.fcntl(1, fcntl.F_SETOWN, int(sys.argv[1]))\n"
                         "fcntl.fcntl(1, 10, signal.SIGSTOP)  # F_SETSIG\n"
                         "fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_ASYNC)"
                         "\nPY\necho -n")


def test_non_blocking_pipes_left_by_a_command_do_not_reach_the_next(sandbox: Any) -> None:
    """An asyncio program does this without meaning harm; a 3 MB output then failed with
    `write error: Resource temporarily unavailable` (a final diff that large: WORKSPACE_
    UNREADABLE)."""
    assert sandbox.exec(NONBLOCK, timeout_sec=20).stdout == "set\n"
    big = sandbox.exec("head -c 3000000 /dev/zero | tr '\\0' x; echo \"rc=${PIPESTATUS[1]}\" >&2",
                       timeout_sec=30)
    assert "write error" not in big.stderr and "rc=0" in big.stderr, big.stderr[-300:]
    # the command's stdout and stderr were open file descriptions of its own (the shell's own,
    # which write its end marks, kept their flags: nothing refused; the cold review found the
    # shell's OUT mark lost when a command left them non-blocking on a full pipe)
    assert sandbox._held_misses == 0


def test_a_stop_armed_on_the_shared_pipe_does_not_time_the_next_command_out(
        sandbox: Any) -> None:
    """O_ASYNC with SIGSTOP and the shell as owner: the shell stopped as the engine read its
    answer, after it, and the next command ran nowhere and read as timed out. Now the command's
    stdout is a file description of its own, whose O_ASYNC registration ends with it (and a
    shell stopped anyway is woken after HELD_GO_SEC)."""
    for _ in range(3):
        sandbox.exec(ARM_STOP, timeout_sec=2)
        started = time.monotonic()
        after = sandbox.exec("echo once >> count.txt; echo next", timeout_sec=20)
        assert after.exit_code == 0 and after.stdout == "next\n" and not after.timed_out
        assert time.monotonic() - started < HELD_GO_SEC + 5  # not the command's deadline
    counted = sandbox.exec("wc -l < count.txt", timeout_sec=20).stdout.strip()
    assert counted == "3", "each command ran once"


@pytest.mark.parametrize("change", ["renice -n 19 -p $r", "taskset -p 1 $r", "chrt -i -p 0 $r",
                                    "ionice -c 3 -p $r"])
def test_scheduling_changed_in_the_shell_does_not_reach_the_next_command(sandbox: Any,
                                                                          change: str) -> None:
    probe = ("echo nice=$(ps -o ni= -p $$ | tr -d ' ') policy=$(chrt -p $$ | head -1 | "
             "sed 's/.*: //') cpus=$(taskset -cp $$ | sed 's/.*: //') io=$(ionice -p $$)")
    before = sandbox.exec(probe, timeout_sec=20).stdout
    changed = sandbox.exec(FIND_HELD + change + " >/dev/null && echo changed", timeout_sec=20)
    assert changed.stdout == "changed\n", changed.stderr
    assert sandbox.exec(probe, timeout_sec=20).stdout == before
