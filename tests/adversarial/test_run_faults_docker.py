"""Issue 8 item 7 (faults): SIGTERM to an xdist controller, and a Docker engine lost mid-run.

On 4a9ba26 SIGTERM killed the controller on the spot (no report, no merged events), and when the
engine went away the label sweep in pytest_sessionfinish raised, so report.html and
report_summary.md were never written.

Both tests run real `python -m pytest -n 2` subprocesses on a small synthetic suite with the
Docker sandbox. The daemon-loss test starts a second dockerd of its own (own data root, exec
root, pid file and socket, no bridge), loads the runner image into it, points the run at it with
DOCKER_HOST and stops that daemon while attempts are running. That daemon and its containerd
run in a network namespace of their own: see Dockerd for what dockerd does to the host's docker0
otherwise, and host_untouched for what is checked to be unchanged on the host and the main daemon.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.run.verdict import INFRA_ERROR
from pytest_agentbench.sandbox.image import DEFAULT_IMAGE
from pytest_agentbench.schemas.records import AttemptRecord
from tests.support.run_dirs import run_dirs
from tests.support.tiny_pack import ORACLE_PATCH

SLOW = "sleep 2; grep -qx good value.txt"  # each attempt: two baseline runs and one score run


def _docker(*args: str, host: str | None = None, timeout: float = 60) -> str:
    env = {**os.environ, **({"DOCKER_HOST": host} if host else {})}
    out = subprocess.run(["docker", *args], env=env, capture_output=True, text=True,
                         timeout=timeout)
    if out.returncode:
        raise RuntimeError(f"docker {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


@pytest.fixture(scope="module")
def docker_engine() -> None:
    try:
        _docker("info", timeout=20)
        _docker("image", "inspect", DEFAULT_IMAGE, timeout=20)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true but Docker or the runner image is missing: {exc}")
        pytest.skip(f"needs Docker and the runner image ({exc}); run scripts/bootstrap")


def _git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    )
    return out.stdout.strip()


@dataclass
class Run:
    proc: subprocess.Popen[bytes]
    out: Path
    log: Path

    @property
    def run_dir(self) -> Path:
        dirs = run_dirs(self.out)
        assert len(dirs) == 1, dirs
        return dirs[0]

    def records(self) -> list[dict[str, object]]:
        path = self.run_dir / "attempts.jsonl"
        lines = path.read_text("utf-8").splitlines() if path.exists() else []
        for line in lines:
            AttemptRecord.model_validate_json(line)  # whole and valid, every line
        return [json.loads(line) for line in lines]

    def text(self) -> str:
        return self.log.read_text("utf-8", "replace")


def _start(tmp: Path, *extra: str, env_extra: dict[str, str] | None = None) -> Run:
    root = tmp / "taskpacks"
    repo = root / "_repos" / "tiny"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "value.txt").write_text("bad\n")
    _git(repo, "add", "value.txt")
    _git(repo, "commit", "-q", "-m", "broken")
    commit = _git(repo, "rev-parse", "HEAD")
    for task_id in ("slow-a", "slow-b"):
        task = root / "synth" / task_id / "task.yaml"
        task.parent.mkdir(parents=True)
        task.write_text(
            f"task_spec_version: 1\nid: {task_id}\nsuite: synth\n"
            f"repo:\n  url: ../../_repos/tiny\n  commit: {commit}\n"
            f"validation:\n  failing_command: {json.dumps(SLOW)}\n"
            f"  passing_command: {json.dumps(SLOW)}\n"
        )
        (task.parent / "oracle.patch").write_text(ORACLE_PATCH)
    home, out, log = tmp / "home", tmp / "out", tmp / "pytest.log"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.update(HOME=str(home), **(env_extra or {}))
    args = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
        "--agentbench-suite", "synth", f"--agentbench-taskpacks={root}",
        f"--agentbench-out={out}", "--agentbench-env-cache=none", f"--basetemp={tmp / 'bt'}",
        *extra,
    ]
    with log.open("wb") as handle:  # its own session: every process of the run is findable
        proc = subprocess.Popen(args, cwd=tmp, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return Run(proc, out, log)


def _wait(what: str, condition: Callable[[], bool], timeout: float, run: Run) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline or run.proc.poll() is not None:
            raise AssertionError(f"gave up waiting for {what}:\n{run.text()[-4000:]}")
        time.sleep(0.2)


def _session_processes(sid: int) -> list[int]:
    """Processes still alive in the run's session (the controller's and its workers')."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[3]) == sid and fields[0] != "Z":  # fields[3]: session id
                alive.append(int(entry.name))
    return alive


def _wait_gone(sid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _session_processes(sid) and time.monotonic() < deadline:
        time.sleep(0.5)


def _containers(run_id: str, host: str | None = None) -> list[str]:
    out = _docker("ps", "-aq", "--filter", "label=agentbench=1",
                  "--filter", f"label=agentbench.run_id={run_id}", host=host)
    return out.split()


def _kill_session(run: Run) -> None:
    """Whatever of the run is left after a failed assertion (its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.proc.pid, signal.SIGKILL)


# --------------------------------------------------------------------------- SIGTERM


def test_sigterm_to_the_xdist_controller_ends_like_ctrl_c(
    tmp_path: Path, docker_engine: None
) -> None:
    run = _start(tmp_path, "--agentbench-attempts", "4")
    try:
        _wait("a first record", lambda: bool(run.out.is_dir() and any(run.out.iterdir())
                                             and run.records()), 240, run)
        run_id = run.run_dir.name
        _wait("containers of running attempts", lambda: bool(_containers(run_id)), 60, run)
        before = len(_containers(run_id))
        kept_before = len(run.records())
        sent = time.monotonic()
        run.proc.send_signal(signal.SIGTERM)
        code = run.proc.wait(timeout=120)
        took = time.monotonic() - sent
        survivors = _session_processes(run.proc.pid)  # workers left running by the controller
        _wait_gone(run.proc.pid, 30)  # give orphans time to notice, so the count below is fair
    finally:
        _kill_session(run)
    text = run.text()
    left = _containers(run_id)
    print(f"SIGTERM: {before} containers before, {len(left)} after; records "
          f"{kept_before} before, {len(run.records())} after; exit {code} after {took:.1f}s; "
          f"{len(survivors)} processes of the run alive when the controller was gone")
    assert code == pytest.ExitCode.INTERRUPTED, text[-4000:]
    assert "INTERNALERROR" not in text, text[-4000:]
    assert not left, f"containers left: {left}"
    assert not survivors, "workers still alive after the controller exited"
    records = run.records()
    assert len(records) >= kept_before
    assert (run.run_dir / "report.html").is_file(), text[-4000:]
    assert (run.run_dir / "report_summary.md").is_file()
    for line in (run.run_dir / "events.jsonl").read_text("utf-8").splitlines():
        assert isinstance(json.loads(line), dict)
    assert not (run.run_dir / "events").exists()  # every worker's part merged


# --------------------------------------------------------------------------- daemon loss


def _ip_json(*args: str) -> list[dict[str, Any]]:
    out = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, timeout=20)
    return json.loads(out.stdout or "[]") if out.returncode == 0 else []


def _lines(*cmd: str) -> list[str]:
    if not shutil.which(cmd[0]):
        return []
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    return out.stdout.splitlines() if out.returncode == 0 else [f"{cmd}: {out.stderr.strip()}"]


Link = tuple[int, bool, tuple[tuple[str, str, int], ...]]  # ifindex, up, addresses


@dataclass(frozen=True)
class HostState:
    """What a second daemon could break for the main one: the host's links (docker0 above all),
    its iptables rules and forwarding, and the main daemon's identity, networks and runner image.
    Other tests run alongside (pytest -n 2): their sandboxes with network add veth links and take
    them away again, so veth links are left out; nothing of theirs removes an iptables rule."""

    links: dict[str, Link]
    ip_forward: str
    iptables: frozenset[str]
    daemon: str
    networks: tuple[str, ...]
    image: bool

    @classmethod
    def now(cls) -> HostState:
        links: dict[str, Link] = {}
        for link in _ip_json("addr", "show"):
            name = str(link["ifname"])
            if not name.startswith("veth"):
                addrs = tuple(sorted((str(a["family"]), str(a["local"]), int(a["prefixlen"]))
                                     for a in link.get("addr_info", [])))
                links[name] = (int(link["ifindex"]), "UP" in link["flags"], addrs)
        return cls(
            links=links,
            ip_forward=Path("/proc/sys/net/ipv4/ip_forward").read_text().strip(),
            iptables=frozenset(_lines("iptables", "-S") + _lines("iptables", "-t", "nat", "-S")),
            daemon=_docker("info", "--format", "{{.ID}}", timeout=20).strip(),
            networks=tuple(sorted(_docker("network", "ls", "-q", "--no-trunc").split())),
            image=_docker("images", "-q", DEFAULT_IMAGE).strip() != "",  # rebuilt or not: there
        )


@dataclass
class HostGuard:
    """The host and the main daemon, as they were before the second daemon started."""

    before: HostState

    def check(self, run_id: str | None = None) -> None:
        after = HostState.now()
        assert after.links.get("docker0") == self.before.links.get("docker0"), (
            f"docker0 of the main daemon: {self.before.links.get('docker0')} -> "
            f"{after.links.get('docker0')}")
        for key in ("links", "ip_forward", "daemon", "networks", "image"):
            old, new = getattr(self.before, key), getattr(after, key)
            assert new == old, f"{key} of the host or the main daemon: {old} -> {new}"
        removed = self.before.iptables - after.iptables
        assert not removed, f"iptables rules of the main daemon removed: {sorted(removed)}"
        if run_id is not None:  # the run went to the second daemon, never to the main one
            assert not _containers(run_id), "the run created containers on the main daemon"


@pytest.fixture
def host_untouched(docker_engine: None) -> Iterator[HostGuard]:
    guard = HostGuard(HostState.now())
    yield guard
    guard.check()  # after the second daemon, its containerd and their mounts are all gone


@dataclass
class Dockerd:
    """A second dockerd that shares nothing with the main one.

    Not even the network namespace: dockerd deletes the host's `docker0` when it starts with
    `--bridge=none` (daemon/daemon_unix.go: `if !conf.DisableBridge {...} else
    { removeDefaultBridgeInterface() }`, which is `netlink.LinkDel` of the link named docker0 in
    its own namespace), so in the host namespace it took the main daemon's bridge away, at every
    start, and `docker build` and sandboxes with network failed on the main daemon until docker0
    was recreated. The default bridge network of a daemon with default address pools does the
    same on restart, and the bridge driver writes ip_forward and iptables. Here both processes run
    in a network namespace of their own (`unshare --net`), where whatever dockerd does to links,
    routes, sysctls or iptables stays. Its containerd is its own too (a dockerd finding
    /run/containerd/containerd.sock would use the system one), with containerd namespaces of its
    own, and its configuration is an empty file, not /etc/docker/daemon.json.
    """

    root: Path
    proc: subprocess.Popen[bytes] | None = None
    containerd: subprocess.Popen[bytes] | None = None
    netns: int = 0  # inode of the namespace both run in

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def host(self) -> str:
        return f"unix://{self.root}/docker.sock"

    def _start_containerd(self) -> None:
        config = self.root / "containerd.toml"
        config.write_text(
            f'version = 2\nroot = "{self.root}/containerd/root"\n'
            f'state = "{self.root}/containerd/state"\n'
            # not io.containerd.runtime.v1.linux: Debian's containerd 1.6.20 (deb12u3) loads no
            # tasks service without a v1 runtime, and the engine then starts no container
            'disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.internal.v1.opt"]\n'
            f'[grpc]\n  address = "{self.root}/containerd.sock"\n'
        )
        with (self.root / "containerd.log").open("ab") as log:
            self.containerd = subprocess.Popen(
                ["unshare", "--net", "--", "containerd", f"--config={config}"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while subprocess.run(["ctr", f"--address={self.root}/containerd.sock", "version"],
                             capture_output=True, timeout=20).returncode:
            if time.monotonic() > deadline or self.containerd.poll() is not None:
                raise RuntimeError((self.root / "containerd.log").read_text()[-2000:])
            time.sleep(0.2)
        self.netns = os.stat(f"/proc/{self.containerd.pid}/ns/net").st_ino  # unshared by now
        assert self.netns != os.stat("/proc/self/ns/net").st_ino, "containerd in the host netns"

    def start(self) -> None:
        if self.containerd is None:
            self._start_containerd()
        assert self.containerd is not None
        (self.root / "daemon.json").write_text("{}\n")
        args = [
            "nsenter", f"--net=/proc/{self.containerd.pid}/ns/net", "--",  # exec, no fork
            "dockerd", f"--config-file={self.root}/daemon.json",
            f"--data-root={self.root}/data", f"--exec-root={self.root}/exec",
            f"--pidfile={self.root}/docker.pid", f"-H={self.host}",
            f"--containerd={self.root}/containerd.sock",
            f"--containerd-namespace=ab-{self.name}",
            f"--containerd-plugins-namespace=ab-{self.name}-plugins",
            "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
            "--ip-forward=false", "--userland-proxy=false", f"--cgroup-parent=ab-{self.name}",
        ]
        with (self.root / "dockerd.log").open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                _docker("info", host=self.host, timeout=10)
                break
            except (RuntimeError, subprocess.SubprocessError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError((self.root / "dockerd.log").read_text()[-2000:]) from None
                time.sleep(0.5)
        assert os.stat(f"/proc/{self.proc.pid}/ns/net").st_ino == self.netns

    def stop(self) -> None:
        _end(self.proc, 60)
        self.proc = None

    def _cgroups(self) -> list[Path]:
        """The cgroups of its containers (--cgroup-parent), deepest first, v1 and v2."""
        tops = [p for p in Path("/sys/fs/cgroup").glob(f"*/ab-{self.name}") if p.is_dir()]
        tops += [p for p in [Path(f"/sys/fs/cgroup/ab-{self.name}")] if p.is_dir()]
        found = [d for top in tops for d in [top, *top.rglob("*")] if d.is_dir()]
        return sorted(found, key=lambda d: len(d.parts), reverse=True)

    def close(self) -> None:
        """Stop both daemons and remove every trace: processes, cgroups, mounts, files."""
        self.stop()
        _end(self.containerd, 30)
        self.containerd = None
        cgroups = self._cgroups()
        for group in cgroups:  # processes of containers the daemon could not stop
            for pid in _pids(group / "cgroup.procs"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self.netns and self.netns != os.stat("/proc/self/ns/net").st_ino:
            for pid in _in_netns(self.netns):  # shims left by a killed containerd
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        for group in cgroups:
            while group.exists():
                try:
                    group.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
        tasks = self.root / "containerd" / "state" / "io.containerd.runtime.v2.task"
        for task in tasks.glob("*/*"):  # shim sockets are in /run/containerd/s, named by hash
            key = os.path.join(f"{self.root}/containerd.sock", task.parent.name, task.name)
            with contextlib.suppress(OSError):
                Path("/run/containerd/s", hashlib.sha256(key.encode()).hexdigest()).unlink()
        for target in _mounts_under(self.root):
            if subprocess.run(["umount", target], capture_output=True).returncode:
                subprocess.run(["umount", "-l", target], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def _end(proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _pids(path: Path) -> list[int]:
    try:
        return [int(line) for line in path.read_text().split()]
    except OSError:
        return []


def _in_netns(inode: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(entry / "ns" / "net").st_ino == inode:
                    pids.append(int(entry.name))
    return pids


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or under root, deepest first (the data root is bind-mounted shared)."""
    targets = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        target = line.split()[4].encode().decode("unicode_escape")  # octal escapes: \040
        if target == str(root) or target.startswith(f"{root}/"):
            targets.append(target)
    return sorted(targets, key=lambda t: t.count("/"), reverse=True)


@pytest.fixture
def second_dockerd(host_untouched: HostGuard) -> Iterator[Dockerd]:
    if os.geteuid() != 0 or not all(shutil.which(b) for b in
                                    ("dockerd", "containerd", "ctr", "unshare", "nsenter")):
        pytest.skip("a second Docker daemon needs root, dockerd, containerd, unshare, nsenter")
    for tries_left in (1, 0):
        # short: unix socket paths are limited
        root = Path(f"/tmp/ab-dockerd-{os.getpid()}-{secrets.token_hex(3)}")
        root.mkdir(mode=0o700)
        daemon = Dockerd(root)
        try:
            daemon.start()
            saved = subprocess.Popen(["docker", "save", DEFAULT_IMAGE], stdout=subprocess.PIPE)
            subprocess.run(["docker", "-H", daemon.host, "load", "-q"], stdin=saved.stdout,
                           check=True, capture_output=True, timeout=600)
            assert saved.wait(timeout=60) == 0
            failure = _cannot_run_a_container(daemon)
            if failure is None:
                yield daemon
                return
        finally:
            daemon.close()
        # the test's own engine is broken (seen once under load: its containerd served no
        # tasks service), which says nothing about the harness: build it afresh, once
        if not tries_left:
            raise RuntimeError(f"the test's second dockerd cannot run a container: {failure}")


def _cannot_run_a_container(daemon: Dockerd) -> str | None:
    """Why the engine cannot start a container, or None when it can: a test of the harness
    against this engine must not start on an engine that fails on its own."""
    try:
        _docker("run", "--rm", "--network=none", "--entrypoint=/bin/true", DEFAULT_IMAGE,
                host=daemon.host, timeout=120)
    except (RuntimeError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None


def test_engine_lost_mid_run_still_writes_the_reports(
    tmp_path: Path, second_dockerd: Dockerd, host_untouched: HostGuard
) -> None:
    host = second_dockerd.host
    run = _start(tmp_path, "--agentbench-attempts", "3", f"--agentbench-image={DEFAULT_IMAGE}",
                 env_extra={"DOCKER_HOST": host})
    try:
        _wait("a first record", lambda: bool(run.out.is_dir() and any(run.out.iterdir())
                                             and run.records()), 240, run)
        run_id = run.run_dir.name
        _wait("containers of running attempts", lambda: bool(_containers(run_id, host)), 60, run)
        before, kept_before = len(_containers(run_id, host)), len(run.records())
        second_dockerd.stop()  # the engine goes away mid-run
        code = run.proc.wait(timeout=600)
    finally:
        _kill_session(run)
    text = run.text()
    records = run.records()
    second_dockerd.start()  # back, to count what the run could not remove
    left = _containers(run_id, host)
    host_untouched.check(run_id)  # two starts of the second daemon: docker0 and the rest intact
    print(f"engine lost: {before} containers before, {len(left)} left after; records "
          f"{kept_before} before, {len(records)} after (of 6); exit {code}")
    assert "INTERNALERROR" not in text and "Traceback" not in text, text[-4000:]
    assert code == INFRA_ERROR, text[-4000:]  # not 1: the engine failed, not the agent
    assert len(records) == 6, text[-4000:]  # every attempt recorded, none lost
    assert any(r["result"]["failure_reason"] == "SANDBOX_ERROR" for r in records)  # type: ignore[index]
    assert (run.run_dir / "report.html").is_file(), text[-4000:]
    assert (run.run_dir / "report_summary.md").is_file()
    failed = [line for line in text.splitlines() if line.startswith("agentbench: session end:")]
    assert len(failed) == 1 and "sweep containers" in failed[0], text[-4000:]
    assert "agentbench gc" in failed[0]
