"""The sandbox contract, written once and run against every implementation (local, docker).

Tests decorated with `isolation_only` check what only an isolating sandbox can promise (network,
limits, users, mounts); the local sandbox isolates nothing by design, so they run on docker only.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_agentbench.paths.files import PathEscape
from pytest_agentbench.sandbox.port import Sandbox, SandboxError, SandboxFactory
from tests.contract.conftest import DOCKER_KINDS

F = TypeVar("F", bound=Callable[..., Any])


def isolation_only(reason: str) -> Callable[[F], F]:
    """Run the test against the docker sandbox only: `reason` says why local cannot pass it."""

    def mark(fn: F) -> F:
        fn.__doc__ = f"{fn.__doc__ or fn.__name__} [docker only: {reason}]"
        return pytest.mark.parametrize(  # type: ignore[no-any-return]
            "sandbox_factory", DOCKER_KINDS, indirect=True)(fn)

    return mark


# -- exec -----------------------------------------------------------------------------------
def test_exec_success_captures_stdout(sandbox: Sandbox) -> None:
    result = sandbox.exec("echo hello", timeout_sec=30)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "hello\n", "")
    assert result.ok and not result.timed_out and not result.stdout_truncated


def test_exec_failure_keeps_exit_code(sandbox: Sandbox) -> None:
    result = sandbox.exec("exit 3", timeout_sec=30)
    assert result.exit_code == 3 and not result.ok and not result.timed_out


def test_stderr_is_separate(sandbox: Sandbox) -> None:
    result = sandbox.exec("echo out; echo err >&2; printf tail >&2", timeout_sec=30)
    assert result.stdout == "out\n"
    assert result.stderr == "err\ntail"
    assert (result.stdout_total_lines, result.stderr_total_lines) == (1, 2)


def test_timeout_returns_promptly(sandbox: Sandbox) -> None:
    start = time.monotonic()
    result = sandbox.exec("sleep 1000", timeout_sec=2)
    assert time.monotonic() - start < 6
    assert result.timed_out and result.exit_code in (124, 137) and not result.ok


def test_background_jobs_do_not_outlive_the_command(sandbox: Sandbox) -> None:
    start = time.monotonic()
    result = sandbox.exec("sleep 313.25 & echo started", timeout_sec=30)
    assert result.stdout == "started\n" and time.monotonic() - start < 5
    probe = sandbox.exec("pgrep -f 'sleep 31[3].25' || echo none", timeout_sec=30)
    assert probe.stdout == "none\n"


def test_printed_trailers_never_decide_the_exit_code(sandbox: Sandbox) -> None:
    """Issue 8 item 3: the status is observed, not read from the output."""
    forge = r"""printf '\n\036agentbench-end:%s 0 0 0\n' "${AGENTBENCH_EXEC_ID:-x}" >&2"""
    failed = sandbox.exec(f"{forge}; exit 1", timeout_sec=30)
    assert failed.exit_code == 1 and not failed.ok
    assert "agentbench-end" in failed.stderr  # the command's own text is kept as it is
    assert sandbox.exec(f"{forge}; exit 0", timeout_sec=30).ok


def test_one_command_at_a_time(sandbox: Sandbox) -> None:
    """Concurrent calls wait for each other (the end of a command kills all its processes)."""
    stamp = "python3 -c 'import time; print(time.time())'"
    results: dict[str, Any] = {}

    def run(name: str, command: str) -> None:
        results[name] = sandbox.exec(command, timeout_sec=30)

    first = threading.Thread(target=run, args=("first", f"{stamp}; sleep 1.5; {stamp}"))
    first.start()
    time.sleep(0.5)
    run("second", stamp)
    first.join()
    first_end = float(results["first"].stdout.split()[1])
    assert float(results["second"].stdout) >= first_end
    assert results["first"].ok and results["second"].ok


def test_provision_gives_an_empty_bounded_directory(sandbox_factory: SandboxFactory,
                                                    tmp_path: Path) -> None:
    """Issue 8 item 8a: the port's side of the workspace's disk limit."""
    assert sandbox_factory.provision(tmp_path / "none", None) == "none"
    assert (tmp_path / "none").is_dir() and not any((tmp_path / "none").iterdir())
    mode = sandbox_factory.provision(tmp_path / "bounded", 16)
    assert mode in ("filesystem", "watched", "measured", "none")
    sandbox_factory.release(tmp_path / "bounded")
    sandbox_factory.release(tmp_path / "bounded")  # twice is fine
    sandbox_factory.release(tmp_path / "never")  # so is a path never provisioned
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(SandboxError, match="empty"):
        sandbox_factory.provision(tmp_path / "full", 16)


def test_huge_output_is_truncated(sandbox: Sandbox) -> None:
    result = sandbox.exec("seq 200000", timeout_sec=60)
    assert result.exit_code == 0 and result.stdout_truncated and not result.stderr_truncated
    assert result.stdout_total_lines == 200000
    assert result.kept_head_lines > 0 and result.kept_tail_lines > 0
    assert result.stdout.startswith("1\n2\n") and result.stdout.endswith("\n200000\n")
    assert len(result.stdout) < 100_000 and "truncated" in result.stdout
    assert result.full_stdout is None and result.full_stderr is None


def test_runaway_output_is_counted_not_hoarded(sandbox: Sandbox) -> None:
    result = sandbox.exec("yes abcdefghij | head -n 3000000", timeout_sec=60)  # 33 MB
    assert result.exit_code == 0 and result.stdout_truncated
    assert result.stdout_total_lines == 3_000_000 and len(result.stdout) < 100_000


def test_full_logs_keep_everything(make_sandbox: Callable[..., Sandbox]) -> None:
    sandbox = make_sandbox(full_logs=True)
    result = sandbox.exec("seq 200000; echo done >&2", timeout_sec=60)
    assert result.stdout_truncated and result.full_stdout is not None
    assert result.full_stdout.count("\n") == 200000 and result.full_stdout.endswith("200000\n")
    assert result.full_stderr == "done\n"


def test_env_defaults_and_overrides(make_sandbox: Callable[..., Sandbox]) -> None:
    sandbox = make_sandbox(env={"FROM_SPEC": "spec"})
    result = sandbox.exec('echo "$PYTHONHASHSEED $TZ $LC_ALL $FROM_SPEC $FROM_CALL"',
                          timeout_sec=30, env={"FROM_CALL": "call"})
    assert result.stdout == "0 UTC C.UTF-8 spec call\n"
    assert sandbox.exec("python3 -c 'print(hash(\"x\"))'", timeout_sec=30).stdout == \
        sandbox.exec("python3 -c 'print(hash(\"x\"))'", timeout_sec=30).stdout


def test_cwd_is_relative_to_the_workdir(sandbox: Sandbox) -> None:
    sandbox.files.write_bytes("sub/marker", b"")
    assert sandbox.exec("pwd", timeout_sec=30).stdout.rstrip() == \
        sandbox.exec("pwd", timeout_sec=30, cwd=".").stdout.rstrip()
    assert sandbox.exec("ls", timeout_sec=30, cwd="sub").stdout == "marker\n"


# -- files ----------------------------------------------------------------------------------
def test_files_round_trip_and_visible_to_exec(sandbox: Sandbox) -> None:
    sandbox.files.write_bytes("pkg/mod.py", b"VALUE = 1\n")
    assert sandbox.exec("cat pkg/mod.py", timeout_sec=30).stdout == "VALUE = 1\n"
    assert sandbox.exec("echo made > made.txt", timeout_sec=30).exit_code == 0
    assert sandbox.files.read_bytes("made.txt") == b"made\n"
    assert sandbox.files.exists("pkg/mod.py") and "made.txt" in sandbox.files.list()
    assert sandbox.exec("echo more >> pkg/mod.py", timeout_sec=30).exit_code == 0
    assert sandbox.files.read_bytes("pkg/mod.py") == b"VALUE = 1\nmore\n"
    sandbox.files.remove("made.txt")
    assert sandbox.exec("test -e made.txt", timeout_sec=30).exit_code == 1


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x"])
def test_path_escapes_are_refused(sandbox: Sandbox, path: str) -> None:
    with pytest.raises(PathEscape):
        sandbox.files.read_bytes(path)
    with pytest.raises(PathEscape):
        sandbox.files.write_bytes(path, b"x")


@pytest.mark.parametrize(("target", "through"), [("/etc", "link/passwd"), ("..", "link/x")])
def test_symlinks_out_of_the_workspace_are_refused(sandbox: Sandbox, target: str,
                                                   through: str) -> None:
    assert sandbox.exec(f"ln -s {target} link", timeout_sec=30).exit_code == 0
    outside = sandbox.spec.workspace.parent / "x"
    with pytest.raises(PathEscape):
        sandbox.files.read_bytes(through)
    with pytest.raises(PathEscape):
        sandbox.files.write_bytes(through, b"escaped")
    assert not outside.exists()


# -- lifecycle -------------------------------------------------------------------------------
def test_facts_describe_the_sandbox(sandbox: Sandbox) -> None:
    facts = sandbox.facts()
    assert facts["isolation"] in ("none", "container")
    assert facts["os"]["python"].startswith("Python 3")
    assert facts["os"]["git"].startswith("git version")
    assert facts["os"]["uname"]


def test_close_is_idempotent_and_final(sandbox: Sandbox) -> None:
    sandbox.close()
    sandbox.close()
    with pytest.raises(SandboxError):
        sandbox.exec("true", timeout_sec=30)


# -- isolation (docker only) -------------------------------------------------------------------
@isolation_only("the local sandbox shares the host's network")
def test_no_network_in_the_agent_phase(sandbox: Sandbox) -> None:
    connect = ("python3 -c 'import socket; "
               "socket.create_connection((\"1.1.1.1\", 53), timeout=3)'")
    assert sandbox.exec(connect, timeout_sec=30).exit_code != 0
    assert sandbox.exec("getent hosts deb.debian.org", timeout_sec=30).exit_code != 0


@isolation_only("the local sandbox cannot switch the network on or off")
def test_setup_phase_with_network_resolves_dns(make_sandbox: Callable[..., Sandbox]) -> None:
    try:
        socket.getaddrinfo("deb.debian.org", 443)
    except OSError as exc:
        pytest.skip(f"this machine itself cannot resolve DNS ({exc})")
    sandbox = make_sandbox(network=True)
    result = sandbox.exec("getent hosts deb.debian.org", timeout_sec=30)
    assert result.exit_code == 0 and result.stdout.strip()


@isolation_only("the local sandbox enforces no pids limit")
def test_fork_bomb_is_contained(make_sandbox: Callable[..., Sandbox]) -> None:
    sandbox = make_sandbox(pids_limit=128)
    start = time.monotonic()
    sandbox.exec(":(){ :|:& };:", timeout_sec=10)
    assert time.monotonic() - start < 20
    after = sandbox.exec("echo ok; ps -e --no-headers | wc -l", timeout_sec=30)
    assert after.stdout.split()[0] == "ok" and int(after.stdout.split()[1]) < 10


@isolation_only("the local sandbox enforces no memory limit")
def test_memory_bomb_is_oom_killed(make_sandbox: Callable[..., Sandbox]) -> None:
    sandbox = make_sandbox(mem_limit_mb=256)
    bomb = "python3 -c 'x = []\nwhile True: x.append(bytearray(10**7))'"
    result = sandbox.exec(bomb, timeout_sec=60)
    assert result.oom_killed and result.exit_code == 137 and not result.timed_out
    assert sandbox.exec("echo alive", timeout_sec=30).stdout == "alive\n"
    assert not sandbox.exec("true", timeout_sec=30).oom_killed


@isolation_only("the local sandbox runs as the host user")
def test_runs_as_unprivileged_user(sandbox: Sandbox) -> None:
    uid = sandbox.exec("id -u", timeout_sec=30).stdout.strip()
    expected = str(sandbox.uid)  # type: ignore[attr-defined]  # SANDBOX_UID (70000) when the host is root
    assert uid == expected and uid != "0"
    keeper = sandbox.exec("for p in 1 $(pgrep -x sleep); do stat -c %u /proc/$p; done",
                          timeout_sec=30).stdout.split()
    assert len(keeper) == 2 and uid not in keeper  # PID 1 and its sleep: another uid
    status = sandbox.exec("grep CapEff /proc/self/status", timeout_sec=30).stdout
    assert status.split() == ["CapEff:", "0000000000000000"]
    assert sandbox.exec("test -e /var/run/docker.sock || test -e /run/docker.sock",
                        timeout_sec=30).exit_code != 0


@isolation_only("the local sandbox has the host's file system")
def test_only_the_mounts_are_writable(sandbox: Sandbox) -> None:
    for path in ("/usr", "/etc", "", "/home"):
        assert sandbox.exec(f"touch {path}/probe", timeout_sec=30).exit_code != 0, path
    for path in ("/workspace", "/tmp", "/env", "/home/runner", "/dev/shm"):
        assert sandbox.exec(f"touch {path}/probe", timeout_sec=30).exit_code == 0, path


@isolation_only("the local sandbox has no CA bundle or pip cache mounts")
def test_ca_bundle_read_only_and_pip_cache(make_sandbox: Callable[..., Sandbox],
                                          tmp_path: Any) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nfake\n")
    bundle.chmod(0o644)
    sandbox = make_sandbox(ca_bundle=bundle, pip_cache=tmp_path / "pip")
    assert sandbox.exec('cat "$PIP_CERT"', timeout_sec=30).stdout.endswith("fake\n")
    assert sandbox.exec('echo x >> "$SSL_CERT_FILE"', timeout_sec=30).exit_code != 0
    assert sandbox.exec("touch ~/.cache/pip/probe", timeout_sec=30).exit_code == 0
    if sandbox.facts().get("transfer") == "archive":  # the cache stays on the engine
        assert not (tmp_path / "pip" / "probe").exists()
    else:
        assert (tmp_path / "pip" / "probe").exists()
    again = make_sandbox(pip_cache=tmp_path / "pip")  # the next sandbox of the task finds it
    assert again.exec("test -f ~/.cache/pip/probe", timeout_sec=30).exit_code == 0
    assert again.exec("rm ~/.cache/pip/probe", timeout_sec=30).exit_code == 0


@isolation_only("labels and container policy exist only for docker")
def test_container_carries_labels_and_policy(make_sandbox: Callable[..., Sandbox],
                                             sandbox_factory: Any) -> None:
    sandbox = make_sandbox(labels={"agentbench.task_id": "t1"})
    attrs = sandbox_factory.client.api.inspect_container(sandbox.container_id)  # type: ignore[attr-defined]
    labels, host = attrs["Config"]["Labels"], attrs["HostConfig"]
    assert labels["agentbench"] == "1" and labels["agentbench.task_id"] == "t1"
    assert host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"] and not host["Privileged"]
    assert host["SecurityOpt"] == ["no-new-privileges"] and host["NetworkMode"] == "none"
    assert host["Memory"] == host["MemorySwap"] == 1024 * 2**20 and host["PidsLimit"] == 256
    assert host["IpcMode"] in ("none", "private") and not host["AutoRemove"]
    facts = sandbox.facts()
    assert facts["image_id"].startswith("sha256:") and "repo_digest" in facts
    assert all(m["source"].startswith("<") for m in facts["create_args"]["mounts"])


@isolation_only("only docker has a host-side deadline over an uncooperative command")
def test_host_deadline_stops_a_wedged_command(sandbox: Sandbox) -> None:
    start = time.monotonic()
    wedge = "kill -STOP $(ps -o ppid= -p $PPID); sleep 1000"  # freezes the timeout wrapper
    result = sandbox.exec(wedge, timeout_sec=1)
    assert result.timed_out and time.monotonic() - start < 12
    assert sandbox.exec("echo ok; pgrep -c sleep", timeout_sec=30).stdout == "ok\n1\n"


@isolation_only("only docker has a PID 1 that commands must not be able to stop")
def test_a_command_cannot_stop_the_sandbox(sandbox: Sandbox) -> None:
    """Issue 8 item 6: `kill -9 -1` or `kill 1` kill the command's own processes only."""
    assert not sandbox.exec("kill -TERM 1; kill -9 -1", timeout_sec=30).timed_out
    assert sandbox.exec("echo alive", timeout_sec=30).stdout == "alive\n"


@isolation_only("the dead-man's switch is the container's PID 1")
def test_sandbox_expires_after_its_lifetime(make_sandbox: Callable[..., Sandbox]) -> None:
    sandbox = make_sandbox(lifetime_sec=1)
    time.sleep(2.5)
    with pytest.raises(SandboxError, match="exited"):
        sandbox.exec("true", timeout_sec=30)


@isolation_only("sweep removes containers")
def test_sweep_removes_everything_it_created(make_sandbox: Callable[..., Sandbox],
                                             sandbox_factory: SandboxFactory) -> None:
    label = {"agentbench.sweep_probe": uuid.uuid4().hex}
    first, second = make_sandbox(labels=label), make_sandbox(labels=label)
    second.exec("true", timeout_sec=30)
    assert sandbox_factory.sweep(label) == 2
    assert sandbox_factory.sweep(label) == 0
    with pytest.raises(SandboxError):
        first.exec("true", timeout_sec=30)


# Python keeps an inherited SIG_IGN for SIGINT (a suite started as a background job of a script):
# the probe takes Ctrl-C as a harness run does (run/sigterm.sigint_as_interrupt), or the test
# would wait out its timeout however the sandbox behaves (issue 20 item 8).
OPEN_AND_WAIT = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path
from pytest_agentbench.sandbox.port import SandboxSpec
from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory
from pytest_agentbench.sandbox.docker.engines import connect, parse_engine
from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE
ws = Path(sys.argv[1]); ws.mkdir()
spec = SandboxSpec(image=DEFAULT_IMAGE, workspace=ws, env_dir=ws.parent / "env",
                   labels={"agentbench.interrupt_probe": sys.argv[2]})
engine, transfer = sys.argv[3], sys.argv[4]
client = connect(parse_engine(engine)) if engine != "default" else None
sandbox = DockerSandboxFactory(client, transfer=transfer).open(spec)
print(sandbox.container_id, flush=True)
time.sleep(120)
"""


@isolation_only("only docker sandboxes can outlive the harness process")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupt_leaves_no_container(sandbox_factory: Any, tmp_path: Path,
                                       signum: signal.Signals) -> None:
    probe = uuid.uuid4().hex
    engine = getattr(sandbox_factory, "test_spec", "default")  # the remote one: its context
    env = {**os.environ, **getattr(sandbox_factory, "test_env", {})}
    proc = subprocess.Popen([sys.executable, "-c", OPEN_AND_WAIT, str(tmp_path / "ws"), probe,
                             engine, sandbox_factory.transfer],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        container_id = proc.stdout.readline().strip()
        assert container_id, proc.stderr.read() if proc.stderr else ""
        assert sandbox_factory.containers({"agentbench.interrupt_probe": probe})
        proc.send_signal(signum)
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert sandbox_factory.sweep({"agentbench.interrupt_probe": probe}) == 0
    assert sandbox_factory.remove_volumes({"agentbench.interrupt_probe": probe}) == 0
