"""A second dockerd for tests, that shares nothing with the main one: `Dockerd`, how to make its
root (`new_root`), and whether it can run a container (`cannot_run_a_container`).

It behaves like a remote machine's engine: its own network namespace, mount namespace, containerd,
data root, exec root, pid file, cgroup parent and containerd namespaces; optionally blind to the
controller's directories (tmpfs over /tmp, /work, /root, /home, /var/tmp in its mount namespace,
so a bind mount of a host path fails: "bind source path does not exist"), and optionally
reachable over TLS on a loopback port of the host (tests/support/netns_forward.py bridges that
port into its namespace). Its namespace reaches the outside the way a rootless engine's does:
slirp4netns gives it a tap0 uplink (10.0.2.100/24, default route via 10.0.2.2) and does the NAT
in user mode, with ordinary sockets of the host's namespace; inside, the daemon has a bridge of
its own (BRIDGE_IP, POOL), with its iptables NAT and ip_forward in that namespace, so containers
with network reach PyPI while the host's links, routes, iptables and sysctls stay as they were.
tests/support/engines.py adds a Docker context and an ssh:// endpoint.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE
from tests.support.host_state import docker

HIDDEN = ("/tmp", "/work", "/root", "/home", "/var/tmp")  # where a controller keeps its work
TLS_PORT = 2376  # in the daemon's own network namespace
FORWARDER = Path(__file__).with_name("netns_forward.py")
TOOLS = ("dockerd", "containerd", "ctr", "unshare", "nsenter", "ip", "mount", "slirp4netns")
# Addresses inside the daemon's namespace, apart from slirp's 10.0.2.0/24, the host's docker0
# (172.17.0.0/16) and the machine's nameserver (10.255.255.53): another namespace, but a route
# or a log line then says at once which engine it is about.
BRIDGE_IP = "10.213.0.1/24"  # its docker0, the default bridge network
POOL = "base=10.214.0.0/16,size=24"  # networks a client creates there
SLIRP_MTU = 65520  # slirp4netns' recommended MTU: fewer, larger packets through user mode

# Runs as containerd's pid before exec: loopback up (a new netns has it down), the controller's
# directories covered by empty read-only tmpfs (read-only: a legacy `-v` bind then fails on the
# daemon's mkdir instead of silently binding a fresh empty directory).
# runc writes each exec's process spec under TMPDIR (else /tmp, read-only here): a directory of
# the daemon's root instead, inherited by containerd's shims.
_ENTER = ('c=$1; shift; ip link set lo up || exit 1; for d; do '
          'mount -t tmpfs -o ro,size=16k,mode=755 ab-hidden "$d" || exit 1; done; '
          'mkdir -p "${c%/*}/tmp" && export TMPDIR="${c%/*}/tmp"; '
          'exec containerd --config="$c"')


def new_root() -> Path:
    """A fresh root directory for a Dockerd, outside every hidden directory, short because unix
    socket paths are limited to 108 bytes."""
    root = Path(f"/var/lib/ab-dockerd-{os.getpid()}-{secrets.token_hex(3)}")
    root.mkdir(mode=0o700)
    return root


@dataclass(frozen=True)
class ServerTls:
    """The daemon's side of TLS: the CA of the client certificates, its own cert and key."""

    ca: Path
    cert: Path
    key: Path


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
    routes, sysctls or iptables stays: there it has a bridge of its own (its docker0, NAT and
    ip_forward of that namespace) and slirp4netns as uplink (module docstring), so sandboxes with
    network work as on a remote machine. Its containerd is its own too (a dockerd finding
    /run/containerd/containerd.sock would use the system one), with containerd namespaces of its
    own, and its configuration is an empty file, not /etc/docker/daemon.json.

    Both share a mount namespace of their own too (`unshare --mount`, dockerd joins with
    `nsenter --mount`): the overlay mounts of its containers never show on the host, and with
    `hide_host_dirs` the controller's directories (HIDDEN) are empty there. The namespaces are
    held by containerd, which lives until close(): stop() and start() restart dockerd alone, and
    its data root (the loaded image) survives them.
    """

    root: Path
    hide_host_dirs: bool = True
    tls: ServerTls | None = None
    proc: subprocess.Popen[bytes] | None = None
    containerd: subprocess.Popen[bytes] | None = None
    forwarder: subprocess.Popen[bytes] | None = None
    slirp: subprocess.Popen[bytes] | None = None  # the namespace's uplink, lives with containerd
    slirp_exit: int = -1  # write end of slirp4netns' --exit-fd pipe: closing it ends slirp
    netns: int = 0  # inode of the network namespace both run in
    tls_port: int = 0  # on the host's 127.0.0.1, forwarded to TLS_PORT in the namespace
    hidden: tuple[str, ...] = field(default=())

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def host(self) -> str:
        return f"unix://{self.root}/docker.sock"

    @property
    def tls_url(self) -> str:
        assert self.tls_port, "no TLS endpoint: Dockerd(tls=...) and start() first"
        return f"tcp://127.0.0.1:{self.tls_port}"

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
        self.hidden = tuple(d for d in HIDDEN if self.hide_host_dirs and os.path.isdir(d)
                            and not str(self.root).startswith(f"{d}/"))
        # private: nothing mounted here reaches the host; slave when nothing is hidden, so that
        # the host's later mounts (a sandbox's disk-limit ext4) still reach the daemon
        propagation = "private" if self.hide_host_dirs else "slave"
        with (self.root / "containerd.log").open("ab") as log:
            self.containerd = subprocess.Popen(
                ["unshare", "--net", "--mount", "--propagation", propagation, "--",
                 "sh", "-c", _ENTER, "enter", str(config), *self.hidden],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while subprocess.run(["ctr", f"--address={self.root}/containerd.sock", "version"],
                             capture_output=True, timeout=20).returncode:
            if time.monotonic() > deadline or self.containerd.poll() is not None:
                raise RuntimeError((self.root / "containerd.log").read_text()[-2000:])
            time.sleep(0.2)
        pid = self.containerd.pid
        self.netns = os.stat(f"/proc/{pid}/ns/net").st_ino  # unshared by now
        assert self.netns != os.stat("/proc/self/ns/net").st_ino, "containerd in the host netns"
        assert os.stat(f"/proc/{pid}/ns/mnt").st_ino != os.stat("/proc/self/ns/mnt").st_ino
        self._start_slirp()
        if self.tls is not None:
            self._start_forwarder()

    def _start_forwarder(self) -> None:
        assert self.containerd is not None
        pid = self.containerd.pid
        with (self.root / "forwarder.log").open("ab") as log:
            self.forwarder = subprocess.Popen(
                [sys.executable, str(FORWARDER), f"/proc/{pid}/ns/net", str(TLS_PORT), str(pid)],
                stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        assert self.forwarder.stdout is not None
        line = self.forwarder.stdout.readline().strip()
        if not line.isdigit():
            raise RuntimeError(f"forwarder: {(self.root / 'forwarder.log').read_text()[-2000:]}")
        self.tls_port = int(line)

    def _start_slirp(self) -> None:
        """slirp4netns on containerd's network namespace: tap0 there, configured (address, default
        route), with no way to the host's loopback (--disable-host-loopback: 10.0.2.2 is not the
        host's 127.0.0.1). It runs in the host's namespace and stays until close(), across
        stop()/start(). --exit-fd is a pipe whose only write end is ours: slirp exits when we
        close it, or when this process dies, never outliving the engine."""
        assert self.containerd is not None
        ready_r, ready_w = os.pipe()
        exit_r, self.slirp_exit = os.pipe()
        try:
            with (self.root / "slirp4netns.log").open("ab") as log:
                self.slirp = subprocess.Popen(
                    ["slirp4netns", "--configure", f"--mtu={SLIRP_MTU}",
                     "--disable-host-loopback", f"--ready-fd={ready_w}", f"--exit-fd={exit_r}",
                     str(self.containerd.pid), "tap0"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    pass_fds=(ready_w, exit_r), start_new_session=True)
        finally:
            os.close(ready_w)
            os.close(exit_r)
        with os.fdopen(ready_r, "rb") as ready:  # "1" once tap0 is configured, EOF if it died
            readable, _, _ = select.select([ready], [], [], 30)
            word = ready.read(1) if readable else b""
        if word != b"1":
            log_text = (self.root / "slirp4netns.log").read_text()
            raise RuntimeError(f"slirp4netns: {log_text[-2000:]}")

    def _end_slirp(self) -> None:
        if self.slirp_exit >= 0:
            os.close(self.slirp_exit)
            self.slirp_exit = -1
        if self.slirp is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.slirp.wait(timeout=10)
        end_process(self.slirp, 10)
        self.slirp = None

    def start(self) -> None:
        if self.containerd is None:
            self._start_containerd()
        assert self.containerd is not None
        # dockerd < 23 derives its engine ID from a key, /etc/docker/key.json by default (the
        # main daemon's ID then), settable in the config file only
        key = f'"deprecated-key-path": "{self.root}/key.json"' if _major_version() < 23 else ""
        (self.root / "daemon.json").write_text(f"{{{key}}}\n")
        pid = self.containerd.pid
        args = [
            "nsenter", f"--net=/proc/{pid}/ns/net", f"--mount=/proc/{pid}/ns/mnt",
            "--",  # exec, no fork
            "dockerd", f"--config-file={self.root}/daemon.json",
            f"--data-root={self.root}/data", f"--exec-root={self.root}/exec",
            f"--pidfile={self.root}/docker.pid", f"-H={self.host}",
            f"--containerd={self.root}/containerd.sock",
            f"--containerd-namespace=ab-{self.name}",
            f"--containerd-plugins-namespace=ab-{self.name}-plugins",
            # a bridge, NAT and forwarding of its own, in its namespace (class docstring)
            f"--bip={BRIDGE_IP}", f"--default-address-pool={POOL}", "--ip6tables=false",
            "--userland-proxy=false", f"--cgroup-parent=ab-{self.name}",
        ]
        if self.tls is not None:
            args += [f"-H=tcp://127.0.0.1:{TLS_PORT}", "--tlsverify",
                     f"--tlscacert={self.tls.ca}", f"--tlscert={self.tls.cert}",
                     f"--tlskey={self.tls.key}"]
        with (self.root / "dockerd.log").open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                docker("info", host=self.host, timeout=10)
                break
            except (RuntimeError, subprocess.SubprocessError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError((self.root / "dockerd.log").read_text()[-2000:]) from None
                time.sleep(0.2)
        assert os.stat(f"/proc/{self.proc.pid}/ns/net").st_ino == self.netns

    def stop(self) -> None:
        end_process(self.proc, 60)
        self.proc = None

    def _cgroups(self) -> list[Path]:
        """The cgroups of its containers (--cgroup-parent), deepest first, v1 and v2."""
        tops = [p for p in Path("/sys/fs/cgroup").glob(f"*/ab-{self.name}") if p.is_dir()]
        tops += [p for p in [Path(f"/sys/fs/cgroup/ab-{self.name}")] if p.is_dir()]
        found = [d for top in tops for d in [top, *top.rglob("*")] if d.is_dir()]
        return sorted(found, key=lambda d: len(d.parts), reverse=True)

    def close(self) -> None:
        """Stop both daemons, the forwarder and slirp4netns and remove every trace: processes,
        cgroups, mounts, files."""
        self.stop()
        end_process(self.forwarder, 10)
        self.forwarder = None
        self._end_slirp()
        end_process(self.containerd, 30)
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
        for target in mounts_under(self.root):  # none: they were in its own mount namespace
            if subprocess.run(["umount", target], capture_output=True).returncode:
                subprocess.run(["umount", "-l", target], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def _major_version() -> int:
    out = subprocess.run(["dockerd", "--version"], capture_output=True, text=True, timeout=30)
    digits = out.stdout.split("version", 1)[-1].strip().split(".", 1)[0]
    return int(digits) if digits.isdigit() else 0


def end_process(proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc is not None and proc.stdout is not None:
        proc.stdout.close()


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


def mounts_under(root: Path, mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """Mount points at or under root in a mount namespace, deepest first."""
    targets = []
    for line in Path(mountinfo).read_text().splitlines():
        target = line.split()[4].encode().decode("unicode_escape")  # octal escapes: \040
        if target == str(root) or target.startswith(f"{root}/"):
            targets.append(target)
    return sorted(targets, key=lambda t: t.count("/"), reverse=True)


def cannot_run_a_container(daemon: Dockerd) -> str | None:
    """Why the engine cannot start a container, or None when it can: a test of the harness
    against this engine must not start on an engine that fails on its own."""
    try:
        docker("run", "--rm", "--network=none", "--entrypoint=/bin/true", DEFAULT_IMAGE,
               host=daemon.host, timeout=120)
    except (RuntimeError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None


def load_image(daemon: Dockerd, image: str = DEFAULT_IMAGE) -> None:
    """`docker save IMAGE | docker -H <daemon> load`: the main engine's image, same Id."""
    saved = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE,
                             env={k: v for k, v in os.environ.items() if k != "DOCKER_HOST"})
    try:
        subprocess.run(["docker", "-H", daemon.host, "load", "-q"], stdin=saved.stdout,
                       check=True, capture_output=True, timeout=600)
    finally:
        assert saved.stdout is not None
        saved.stdout.close()
        assert saved.wait(timeout=60) == 0, f"docker save {image} failed"
