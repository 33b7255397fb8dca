"""Issue 8 item 3: the exit status of a command cannot be forged from inside the sandbox.

On 4a9ba26 the exec wrapper ended the stream with a trailer `agentbench-end:<marker> <rc> ...`
whose marker was in the command's own environment (AGENTBENCH_EXEC_ID): a command printed a
forged `0` trailer, killed the wrapper, and the host believed it. Now the exit status is the
wrapper's as the engine observed it, and the wrapper runs under an execute-only shell, so the
command cannot read its environment (its nonce) or ptrace it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.sandboxes import STEAL_NONCE, WRAPPER_PID, MakeSandbox

FORGE = (r"""printf '\n\036agentbench-end:%s 0 0 0\n' "${AGENTBENCH_EXEC_ID:-guess}" >&2""")


def test_forged_trailer_then_killing_the_wrapper_is_not_a_pass(
    make_docker_sandbox: MakeSandbox,
) -> None:
    sandbox = make_docker_sandbox()
    result = sandbox.exec(f"echo '1 failed, 9 passed'; {WRAPPER_PID}; {FORGE}; kill -9 $w; exit 1",
                          timeout_sec=30)
    assert result.exit_code != 0 and not result.ok
    assert not result.timed_out


@pytest.mark.parametrize("signal", ["KILL", "TERM", "HUP", "INT", "USR1"])
def test_killing_the_wrapper_never_reads_as_success(make_docker_sandbox: MakeSandbox,
                                                    signal: str) -> None:
    sandbox = make_docker_sandbox()
    result = sandbox.exec(f"{WRAPPER_PID}; kill -{signal} $w; sleep 0.5; exit 0", timeout_sec=30)
    assert result.exit_code != 0 and not result.ok
    assert sandbox.exec("echo alive", timeout_sec=30).stdout == "alive\n"


def test_the_command_cannot_read_or_trace_the_wrapper(make_docker_sandbox: MakeSandbox) -> None:
    sandbox = make_docker_sandbox()
    probe = f"""{WRAPPER_PID}
cat /proc/$w/environ >/dev/null 2>&1 && echo environ-readable
python3 - "$w" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(16, int(sys.argv[1]), 0, 0) == 0:  # PTRACE_ATTACH
    print("ptrace-attached")
    os.waitpid(int(sys.argv[1]), 0x40000000)
    libc.ptrace(17, int(sys.argv[1]), 0, 0)  # PTRACE_DETACH
PY
env | grep -c -i -e nonce -e exec_id || true
"""
    result = sandbox.exec(probe, timeout_sec=30)
    assert "environ-readable" not in result.stdout
    assert "ptrace-attached" not in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "0"  # no marker in the command's env


def test_real_exit_codes_and_oom_still_reported(make_docker_sandbox: MakeSandbox) -> None:
    sandbox = make_docker_sandbox(mem_limit_mb=256)
    assert sandbox.exec("exit 7", timeout_sec=30).exit_code == 7
    assert sandbox.exec(f"{FORGE}; exit 0", timeout_sec=30).ok
    bomb = "python3 -c 'x = []\nwhile True: x.append(bytearray(10**7))'"
    result = sandbox.exec(bomb, timeout_sec=60)
    assert result.oom_killed and result.exit_code == 137 and not result.timed_out
    slow = sandbox.exec("trap '' TERM; sleep 30", timeout_sec=1)
    assert slow.timed_out and slow.exit_code == 137
    assert sandbox.exec("sleep 30", timeout_sec=1).exit_code == 124


FORGE_WITH_NONCE = r"""printf '\n\036agentbench-end:%s 0 0 0 -\n' "$n" >&2"""


def test_a_nonce_stolen_from_a_readable_wrapper_forges_no_status(
    make_docker_sandbox: MakeSandbox, plain_shell_image: str,
) -> None:
    """Without the execute-only shell the command can read the wrapper's nonce, so the trailer's
    status is not believed there: the engine's is (the wrapper killed: 137)."""
    sandbox = make_docker_sandbox(image=plain_shell_image)
    result = sandbox.exec(f'{STEAL_NONCE}; [ -n "$n" ] && echo stolen; {FORGE_WITH_NONCE}; '
                          "kill -9 $w; exit 1", timeout_sec=30)
    assert "stolen" in result.stdout  # the attack had the real nonce
    assert result.exit_code == 137 and not result.ok
    assert sandbox.exec("exit 3", timeout_sec=30).exit_code == 3


def test_under_the_private_shell_the_status_comes_without_asking_the_engine(
    make_docker_sandbox: MakeSandbox,
) -> None:
    """The trailer's status saves the exec_inspect round trip (the hot path); a killed wrapper
    (no trailer) still asks the engine."""
    sandbox = make_docker_sandbox()
    inspected: list[str] = []
    inspect = sandbox._api.exec_inspect

    def spy(exec_id: str) -> Any:
        inspected.append(exec_id)
        return inspect(exec_id)

    sandbox._api.exec_inspect = spy
    try:
        assert sandbox.exec(f'{STEAL_NONCE}; [ -n "$n" ] || echo hidden; exit 5',
                            timeout_sec=30).exit_code == 5
        assert inspected == []
        result = sandbox.exec(f"{WRAPPER_PID}; kill -9 $w; exit 0", timeout_sec=30)
        assert result.exit_code == 137 and len(inspected) >= 1
    finally:
        del sandbox._api.exec_inspect


def test_the_facts_say_which_shell_the_wrapper_runs_under(
    make_docker_sandbox: MakeSandbox, plain_shell_image: str,
) -> None:
    """Read before any command (the OS facts of an image are probed once, so a second sandbox's
    facts run nothing), `private_shell` is the checked answer, not the label's."""
    assert [make_docker_sandbox().facts()["private_shell"] for _ in range(2)] == [True, True]
    assert make_docker_sandbox(image=plain_shell_image).facts()["private_shell"] is False
