"""The tests' second Docker engine itself (tests/support/engines.py): every endpoint answers the
way it should and refuses what it should, the runner image is the main engine's, the engine
cannot see the controller's directories, and closing one leaves nothing behind on the host.

The latency test prints the figures of the remote-engine note: median `ping` over the unix
socket, TLS and ssh, 100 each. A container with network there reaches PyPI (slirp4netns and the
engine's own bridge, in its namespace), before and after a restart, the host's iptables untouched.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import socket
import statistics
import subprocess
import tarfile
import time
from contextlib import closing
from pathlib import Path

import docker
import docker.errors
import docker.tls
import pytest
import requests
from docker.types import Mount

from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE
from tests.support.dockerd import BRIDGE_IP, mounts_under
from tests.support.engine_access import make_certs
from tests.support.engines import SecondEngine, open_engine
from tests.support.host_state import HostGuard, HostState
from tests.support.host_state import docker as docker_cli

pytestmark = pytest.mark.xdist_group("second_engine")

REFUSED = (requests.exceptions.RequestException, docker.errors.DockerException)
PARAMIKO = "docker-py's ssh:// imports paramiko even with use_ssh_client=True (docker[ssh])"


@pytest.fixture(autouse=True)
def no_env_ca_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    """requests lets REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE (set on this machine) replace the CA
    docker-py's TLSConfig sets on the session: verification of the engine's certificate then
    fails (test_an_env_ca_bundle_breaks_docker_py_tls pins this)."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)


def tls_client(engine: SecondEngine, certs: Path | None = None,
               client_cert: bool = True) -> closing[docker.DockerClient]:
    certs = certs or engine.tls_dir
    tls = docker.tls.TLSConfig(
        client_cert=(str(certs / "cert.pem"), str(certs / "key.pem")) if client_cert else None,
        ca_cert=str(engine.tls_dir / "ca.pem"), verify=True)
    return closing(docker.DockerClient(base_url=engine.tls_url, tls=tls, timeout=30))


def test_tls_with_the_client_certificates_reaches_the_second_engine(
        second_engine: SecondEngine) -> None:
    main_id = docker.from_env().info()["ID"]
    with tls_client(second_engine) as client:
        assert client.ping()
        assert client.info()["ID"] not in ("", main_id)
    assert sorted(p.name for p in second_engine.tls_dir.iterdir()) == [
        "ca.pem", "cert.pem", "key.pem"]
    out = docker_cli("info", "--format", "{{.ID}}", env=second_engine.tls_env())
    assert out.strip() == docker_cli("info", "--format", "{{.ID}}", host=second_engine.unix_host
                                     ).strip()


def test_tls_refuses_plain_http_and_clients_without_a_good_certificate(
        second_engine: SecondEngine, tmp_path: Path) -> None:
    with pytest.raises(REFUSED), closing(docker.DockerClient(
            base_url=second_engine.tls_url.replace("tcp://", "http://"), timeout=10)) as plain:
        plain.ping()
    port = int(second_engine.tls_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = raw.recv(4096)
    assert b"200 OK" not in answer and answer.startswith(b"HTTP/1.0 400"), answer
    with pytest.raises(REFUSED), tls_client(second_engine, client_cert=False) as anonymous:
        anonymous.ping()
    _, stranger = make_certs(tmp_path / "other-ca")  # a client cert the engine's CA never signed
    with pytest.raises(REFUSED), tls_client(second_engine, stranger) as forged:
        forged.ping()


def test_the_docker_context_reaches_the_second_engine(
        second_engine: SecondEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    engine_id = docker_cli("info", "--format", "{{.ID}}", host=second_engine.unix_host).strip()
    env = {"DOCKER_CONFIG": str(second_engine.docker_config)}
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    named = docker_cli("--context", second_engine.context, "info", "--format", "{{.ID}}", env=env)
    assert named.strip() == engine_id
    assert docker_cli("info", "--format", "{{.ID}}", env=second_engine.env()).strip() == engine_id
    assert docker_cli("info", "--format", "{{.ID}}", env=env).strip() == engine_id  # current
    real = Path.home() / ".docker" / "contexts"
    assert not real.exists() or second_engine.context not in subprocess.run(
        ["grep", "-rl", second_engine.context, str(real)], capture_output=True, text=True).stdout
    monkeypatch.setenv("DOCKER_CONFIG", str(second_engine.docker_config))  # docker-py's way
    context = docker.ContextAPI.get_current_context()
    assert context.name == second_engine.context and context.Host == second_engine.tls_url
    with closing(docker.DockerClient(base_url=context.Host, tls=context.TLSConfig)) as client:
        assert client.info()["ID"] == engine_id


def test_ssh_reaches_the_second_engine_with_the_docker_cli(second_engine: SecondEngine) -> None:
    engine_id = docker_cli("info", "--format", "{{.ID}}", host=second_engine.unix_host).strip()
    out = docker_cli("-H", second_engine.ssh_url, "info", "--format", "{{.ID}}",
                     env=second_engine.ssh_env())
    assert out.strip() == engine_id
    ssh = subprocess.run(["ssh", "127.0.0.1", "id"], env={**os.environ, **second_engine.ssh_env()},
                         input="", capture_output=True, text=True, timeout=30)
    assert "uid=0" not in ssh.stdout, "the ssh endpoint ran a command other than dial-stdio"


def test_ssh_reaches_the_second_engine_with_docker_py(
        second_engine: SecondEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("paramiko", reason=PARAMIKO)
    engine_id = docker_cli("info", "--format", "{{.ID}}", host=second_engine.unix_host).strip()
    for key, value in second_engine.ssh_env().items():
        monkeypatch.setenv(key, value)
    with closing(docker.DockerClient(base_url=second_engine.ssh_url,
                                     use_ssh_client=True)) as client:
        assert client.info()["ID"] == engine_id


def test_the_runner_image_is_the_main_engines(second_engine: SecondEngine) -> None:
    here = docker_cli("image", "inspect", "--format", "{{.Id}}", DEFAULT_IMAGE)
    there = docker_cli("image", "inspect", "--format", "{{.Id}}", DEFAULT_IMAGE,
                       host=second_engine.unix_host)
    assert there.strip() == here.strip() != ""


def test_a_bind_mount_of_a_controller_directory_fails_loudly(
        second_engine: SecondEngine, tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "file.txt").write_text("on the controller\n")
    labels = {"agentbench.test": "hidden-bind"}
    with closing(docker.DockerClient(base_url=second_engine.unix_host)) as client:
        try:
            with pytest.raises(docker.errors.APIError, match="bind source path does not exist"):
                client.containers.run(DEFAULT_IMAGE, ["cat", "/w/file.txt"], remove=True,
                                      network_mode="none", entrypoint=[], labels=labels,
                                      mounts=[Mount("/w", str(tmp_path / "work"), type="bind")])
            # the legacy -v form (the daemon would mkdir a missing source) fails too, at start:
            # the tmpfs is read-only
            with pytest.raises(docker.errors.APIError, match="read-only file system"):
                client.containers.run(DEFAULT_IMAGE, ["true"], remove=True, network_mode="none",
                                      entrypoint=[], labels=labels,
                                      volumes={str(tmp_path / "new"): {"bind": "/w"}})
        finally:
            for container in client.containers.list(all=True, filters={"label": "agentbench.test"}):
                container.remove(force=True)


def test_stop_and_start_keep_the_endpoints_and_the_image(second_engine: SecondEngine) -> None:
    second_engine.stop()
    try:
        with pytest.raises(REFUSED), tls_client(second_engine) as client:
            client.ping()
    finally:
        second_engine.start()
    with tls_client(second_engine) as client:
        assert client.images.get(DEFAULT_IMAGE)
    out = docker_cli("-H", second_engine.ssh_url, "version", "--format", "{{.Server.Version}}",
                     env=second_engine.ssh_env())
    assert out.strip()


CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")  # this machine's, proxy CA included
PYPI_PROBE = ("getent hosts pypi.org && python -m pip download -q --no-deps --no-cache-dir "
              "tomli==2.0.1 -d /tmp/dl && ls /tmp/dl")


def _pypi_failure(host: str | None) -> str | None:
    """Why a container with network on `host` (None: the main engine) cannot resolve pypi.org
    and download a wheel over TLS verified by this machine's CA bundle, or None when it can. The
    bundle goes in by `docker cp`: the second engine cannot bind a host path."""
    cid = docker_cli("create", "--network=bridge", "--entrypoint=sh", "--label=agentbench.test=1",
                     "-e", "PIP_CERT=/tmp/ca.crt", "-e", "SSL_CERT_FILE=/tmp/ca.crt",
                     DEFAULT_IMAGE, "-c", PYPI_PROBE, host=host).strip()
    try:
        docker_cli("cp", str(CA_BUNDLE), f"{cid}:/tmp/ca.crt", host=host)
        out = docker_cli("start", "-a", cid, host=host, timeout=180)
        code = docker_cli("inspect", "--format", "{{.State.ExitCode}}", cid, host=host).strip()
        return None if code == "0" and "tomli-2.0.1-py3-none-any.whl" in out else f"{code}: {out}"
    except (RuntimeError, subprocess.SubprocessError) as exc:
        return str(exc)
    finally:
        docker_cli("rm", "-f", cid, host=host)


def test_a_container_with_network_reaches_pypi_from_the_second_engine(
        second_engine: SecondEngine) -> None:
    """What a task's setup phase needs there (`pip install`): DNS (the daemon's resolv.conf, the
    machine's nameserver) and HTTPS through the engine's bridge and NAT, then slirp4netns; after
    a restart of dockerd too (slirp stays, the bridge is rebuilt). The host's iptables, forwarding
    and docker0 are the same afterwards: all of it happened in the engine's namespace."""
    if not CA_BUNDLE.is_file():
        pytest.skip(f"no CA bundle at {CA_BUNDLE}")
    if (failure := _pypi_failure(None)) is not None:
        pytest.skip(f"the main engine cannot reach PyPI either: {failure[-500:]}")
    before = HostState.now()
    subnet = docker_cli("network", "inspect", "bridge", "--format",
                        "{{(index .IPAM.Config 0).Subnet}}", host=second_engine.unix_host)
    assert subnet.strip() == BRIDGE_IP.replace(".1/", ".0/")
    assert _pypi_failure(second_engine.unix_host) is None
    second_engine.stop()
    second_engine.start()
    assert _pypi_failure(second_engine.unix_host) is None
    after = HostState.now()  # other tests' sandboxes on the main engine add no iptables rule
    assert after.iptables == before.iptables and after.ip_forward == before.ip_forward
    assert after.links.get("docker0") == before.links.get("docker0") and "tap0" not in after.links


def test_streams_and_archives_pass_the_tls_forwarder(
        second_engine: SecondEngine, tmp_path: Path) -> None:
    """`exec -i` ends when its stdin does (over TLS the client's CloseWrite is a close_notify
    record, bytes to the forwarder), and archives both ways arrive whole, through TLS and the
    netns forwarder."""
    env = second_engine.tls_env()
    name = f"ab-streams-{os.getpid()}"
    docker_cli("run", "-d", "--name", name, "--network=none", "--entrypoint=sleep",
               DEFAULT_IMAGE, "300", env=env)
    try:
        data = os.urandom(3 << 20)
        out = subprocess.run(["docker", "exec", "-i", name, "sha256sum"], input=data,
                             env={**os.environ, **env}, capture_output=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split()[0].decode() == hashlib.sha256(data).hexdigest()
        (tmp_path / "in.bin").write_bytes(data)
        docker_cli("cp", str(tmp_path / "in.bin"), f"{name}:/tmp/in.bin", env=env)
        docker_cli("cp", f"{name}:/tmp/in.bin", str(tmp_path / "out.bin"), env=env)
        assert (tmp_path / "out.bin").read_bytes() == data
    finally:
        docker_cli("rm", "-f", name, env=env)


def test_the_forwarder_dies_with_the_engines_namespace() -> None:
    engine = open_engine()
    try:
        daemon = engine.daemon
        assert daemon.forwarder is not None and daemon.containerd is not None
        daemon.stop()  # dockerd alone: the forwarder stays, connections are closed at once
        with socket.create_connection(("127.0.0.1", daemon.tls_port), timeout=5) as sock:
            assert sock.recv(1) == b""
        daemon.containerd.kill()  # the namespace's holder: the forwarder follows
        daemon.containerd.wait()
        assert daemon.forwarder.wait(timeout=10) == 0
    finally:
        engine.close()


def test_an_env_ca_bundle_breaks_docker_py_tls(
        second_engine: SecondEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pitfall, pinned: with REQUESTS_CA_BUNDLE set, requests verifies the engine against that
    bundle instead of TLSConfig's ca_cert (Session.merge_environment_settings), so docker-py
    cannot reach a TLS engine with a private CA; a session with trust_env=False can."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    with pytest.raises(docker.errors.DockerException, match="CERTIFICATE_VERIFY_FAILED"):
        tls_client(second_engine)
    tls = docker.tls.TLSConfig(client_cert=(str(second_engine.tls_dir / "cert.pem"),
                                            str(second_engine.tls_dir / "key.pem")),
                               ca_cert=str(second_engine.tls_dir / "ca.pem"), verify=True)
    api = docker.APIClient(base_url=second_engine.tls_url, tls=tls, version="1.41")
    api.trust_env = False  # no CA bundle (nor proxy) from the environment
    with closing(api):
        assert api.ping()


def _median_ping_ms(client: docker.DockerClient, times: int = 100) -> float:
    client.ping()  # the connection is open before the clock starts
    took = []
    for _ in range(times):
        started = time.perf_counter()
        client.ping()
        took.append(time.perf_counter() - started)
    return statistics.median(took) * 1000


def test_ping_latency_unix_tls_ssh(
        second_engine: SecondEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in second_engine.ssh_env().items():
        monkeypatch.setenv(key, value)
    clients = {"unix": closing(docker.DockerClient(base_url=second_engine.unix_host)),
               "tls": tls_client(second_engine)}
    if importlib.util.find_spec("paramiko"):  # else: PARAMIKO
        clients["ssh"] = closing(docker.DockerClient(base_url=second_engine.ssh_url,
                                                     use_ssh_client=True))
    medians = {}
    for name, closed_after in clients.items():
        with closed_after as client:
            medians[name] = _median_ping_ms(client)
    print("second engine, median ping of 100 (ms): "
          + ", ".join(f"{name} {ms:.2f}" for name, ms in medians.items())
          + f"; started in {second_engine.timings['start']:.1f}s, runner image loaded in "
          f"{second_engine.timings['image_load']:.1f}s")
    assert all(0 < ms < 1000 for ms in medians.values()), medians


def _tiny_image() -> bytes:
    """A root filesystem of /usr/bin/sleep and the libraries it loads, for `docker import`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in ("/usr/bin/sleep", "/lib/x86_64-linux-gnu/libc.so.6",
                     "/lib64/ld-linux-x86-64.so.2"):
            tar.add(os.path.realpath(path), arcname=path.lstrip("/"))
    return buffer.getvalue()


def _processes_of(pids: set[int]) -> set[int]:
    return {pid for pid in pids if Path(f"/proc/{pid}").exists()}


def _mentioning(text: str) -> list[int]:
    """Processes whose command line mentions `text` (the engine's root: its shims, sshd...)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_close_leaves_nothing_behind() -> None:
    if not all(os.path.exists(p) for p in ("/lib64/ld-linux-x86-64.so.2",
                                           "/lib/x86_64-linux-gnu/libc.so.6")):
        pytest.skip("the tiny image is made of this host's x86-64 glibc")
    engine = open_engine()  # no runner image: a tiny one, so that a container is running
    closed = False
    try:
        guard = HostGuard(engine.host_before)
        daemon = engine.daemon
        subprocess.run(["docker", "-H", engine.unix_host, "import", "-", "ab-tiny:1"],
                       input=_tiny_image(), check=True, capture_output=True, timeout=60)
        docker_cli("run", "-d", "--network=none", "ab-tiny:1", "/usr/bin/sleep", "300",
                   host=engine.unix_host)
        assert daemon.containerd and daemon.proc and daemon.forwarder and engine.sshd.proc
        assert daemon.slirp
        pids = {daemon.containerd.pid, daemon.proc.pid, daemon.forwarder.pid,
                engine.sshd.proc.pid, daemon.slirp.pid}
        ports = [int(engine.tls_url.rsplit(":", 1)[1]), engine.sshd.port]
        cgroups = daemon._cgroups()
        assert cgroups and not mounts_under(daemon.root)  # its mounts are in its own namespace
        engine.close()
        closed = True
    finally:
        if not closed:
            engine.close()
    assert not daemon.root.exists()
    assert not _processes_of(pids)
    assert not [group for group in cgroups if group.exists()]
    assert not _mentioning(daemon.name), "a process of the closed engine is still running"
    for port in ports:
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    guard.check()
