"""Engines against real daemons: the local one reached as `default`, by its socket URL and as a
Docker context made with `docker context create`; an engine that never answers; the filesystem
probe; `agentbench doctor` and `gc` with several engines. The second engine's half (TLS context,
ssh, no shared filesystem, image transfer) is in test_second_engine_docker.py."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from pytest_agentbench.cli.doctor import run_doctor
from pytest_agentbench.cli.doctor_engines import _gc_volumes, isolation_problem
from pytest_agentbench.sandbox.docker import exec_stream
from pytest_agentbench.sandbox.docker.engines import (
    EngineUnreachable,
    connect,
    default_slots,
    engine_info,
    parse_engine,
    shares_filesystem,
)
from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE
from pytest_agentbench.sandbox.docker.image_transfer import ensure_image_on
from tests.support.sandboxes import in_ci

LOCAL_SOCKET = "unix:///var/run/docker.sock"
PROBE_FILTER = {"label": "agentbench.probe=1"}


def docker_or_skip() -> None:
    try:
        docker.from_env(timeout=10).ping()
    except Exception as exc:  # noqa: BLE001
        if in_ci():
            pytest.fail(f"CI=true but no Docker daemon answers: {exc}", pytrace=False)
        pytest.skip("no Docker daemon answers; run scripts/ensure-docker")


@pytest.fixture(scope="module")
def local() -> docker.DockerClient:
    docker_or_skip()
    return docker.from_env()


@pytest.fixture
def context_config(tmp_path: Path, local: docker.DockerClient) -> Iterator[Path]:
    """A DOCKER_CONFIG holding a context `h2-local` for the local socket, made by the CLI."""
    config = tmp_path / "docker-config"
    subprocess.run(["docker", "--config", str(config), "context", "create", "h2-local",
                    "--docker", f"host={LOCAL_SOCKET}"], check=True, capture_output=True)
    yield config


def test_the_local_engine_three_ways(context_config: Path, local: docker.DockerClient) -> None:
    expected = local.info()["ID"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
    env["DOCKER_CONFIG"] = str(context_config)
    for text in ("default", LOCAL_SOCKET, "h2-local,slots=3"):
        client = connect(parse_engine(text), timeout=20, environ=env)
        info = engine_info(client)
        assert info["id"] == expected and info["api_version"] and info["version"]
        assert default_slots(info) == max(1, info["ncpu"]) >= 1
        client.close()
    chosen = connect(parse_engine("default"), environ={**env, "DOCKER_CONTEXT": "h2-local"})
    assert engine_info(chosen)["id"] == expected


def test_a_missing_socket_is_one_line() -> None:
    with pytest.raises(EngineUnreachable) as info:
        connect(parse_engine("unix:///nonexistent/docker.sock"), timeout=5)
    assert str(info.value).startswith("engine unix:///nonexistent/docker.sock: unreachable (")
    assert "\n" not in str(info.value)


def test_an_engine_that_never_answers_is_given_up_on_in_time() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # accepts, reads nothing, answers nothing
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    start = time.monotonic()
    try:
        with pytest.raises(EngineUnreachable, match="unreachable"):
            connect(parse_engine(f"tcp://127.0.0.1:{port},tls=off"), timeout=2)
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()
    assert time.monotonic() - start < 6


def test_the_local_engine_shares_our_filesystem(tmp_path: Path,
                                                local: docker.DockerClient) -> None:
    durations = []
    for _ in range(5):
        start = time.monotonic()
        assert shares_filesystem(local, tmp_path / "probes") is True
        durations.append(time.monotonic() - start)
    assert list((tmp_path / "probes").iterdir()) == []
    probes = local.api.containers(all=True, filters=PROBE_FILTER)  # another worker's run probes too
    assert [c for c in probes if any(str(tmp_path) in m.get("Source", "")
                                     for m in c.get("Mounts", []))] == []
    print(f"shares_filesystem on the local engine: median {sorted(durations)[2]:.3f}s")


def test_no_image_to_probe_with_means_no_shared_filesystem(tmp_path: Path,
                                                           local: docker.DockerClient) -> None:
    assert shares_filesystem(local, tmp_path, image="agentbench/no-such-image:x") is False
    assert list(tmp_path.iterdir()) == []


def test_the_runner_image_is_present_here_and_isolation_holds(local: docker.DockerClient) -> None:
    found = ensure_image_on(local, DEFAULT_IMAGE, source=None)
    assert found["how"] == "present" and found["context_hash"] and found["bytes"] == 0
    assert isolation_problem(local, found["id"]) is None


def test_doctor_with_two_engines(context_config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docker_or_skip()
    monkeypatch.setenv("DOCKER_CONFIG", str(context_config))
    lines: list[str] = []
    specs = [parse_engine(LOCAL_SOCKET), parse_engine("h2-local")]
    assert run_doctor(build=False, write=lines.append, engines=specs) == 0, lines
    assert len(lines) == 2
    for line, name in zip(lines, (LOCAL_SOCKET, "h2-local"), strict=True):
        assert line.startswith(f"PASS engine {name}: reachable (Docker "), line
        assert ", runner image " in line and " present, transfer bind (probe " in line, line
        assert line.endswith(", isolation ok"), line
    lines.clear()
    specs.append(parse_engine("unix:///nonexistent.sock"))
    assert run_doctor(build=False, write=lines.append, engines=specs) == 1
    assert lines[2].startswith("FAIL engine unix:///nonexistent.sock: unreachable (")


def test_doctor_and_gc_refuse_a_bad_engine_in_one_line() -> None:
    for command in ("doctor", "gc"):
        proc = subprocess.run([sys.executable, "-m", "pytest_agentbench.cli.main", command,
                               "--engine", "default", "--engine", "http://h:1"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2
        assert proc.stderr.splitlines()[-1].endswith(
            "--engine: engine 'http://h:1': scheme http:// is not supported; expected unix://, "
            "tcp:// or ssh:// (a Docker engine over TCP is tcp://HOST:PORT)")


def test_gc_removes_only_leftover_volumes(local: docker.DockerClient) -> None:
    """Ownerless or dead-owner volumes go; caches, live owners' and used ones stay."""
    here = socket.gethostname()
    made = {
        "dead": {"agentbench": "1", "agentbench.owner": f"{here}:999999999"},
        "ownerless": {"agentbench": "1"},
        "live": {"agentbench": "1", "agentbench.owner": f"{here}:{os.getpid()}"},
        "cache": {"agentbench": "1", "agentbench.cache": "test"},
        "used": {"agentbench": "1"},
    }
    names = {role: local.api.create_volume(None, labels={**labels, "h2.test": "1"})["Name"]
             for role, labels in made.items()}
    user = local.api.create_container(DEFAULT_IMAGE, command=["true"],
                                      host_config=local.api.create_host_config(
                                          binds={names["used"]: {"bind": "/v", "mode": "rw"}}))
    try:
        _gc_volumes(local, None)
        left = {v["Name"] for v in local.api.volumes(filters={"label": "h2.test=1"})["Volumes"]}
        assert left == {names["live"], names["cache"], names["used"]}
    finally:
        local.api.remove_container(user["Id"], force=True)
        for name in names.values():
            with contextlib.suppress(docker.errors.NotFound):
                local.api.remove_volume(name)


def test_gc_names_each_engine(context_config: Path) -> None:
    docker_or_skip()
    env = {**os.environ, "DOCKER_CONFIG": str(context_config)}
    proc = subprocess.run([sys.executable, "-m", "pytest_agentbench.cli.main", "gc",
                           "--older-than", "1e9", "--engine", LOCAL_SOCKET, "--engine",
                           "h2-local", "--engine", "unix:///nonexistent.sock"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.splitlines()
    assert [line.split(":")[0] + ":" + line.split(":")[1] for line in out] == [
        "agentbench gc: engine unix", "agentbench gc: engine h2-local"], out
    assert "removed 0 container(s)" in out[0]
    assert proc.stderr.startswith("agentbench gc: engine unix:///nonexistent.sock: unreachable")


@pytest.fixture
def ssh_to_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An sshd of the test's own on loopback whose one command is dial-stdio to the local
    engine (tests/support/engine_access.py); HOME and PATH set so `ssh` finds its config."""
    docker_or_skip()
    access = pytest.importorskip("tests.support.engine_access")
    missing = [tool for tool in access.TOOLS if not shutil.which(tool)]
    if os.geteuid() != 0 or missing:
        pytest.skip(f"an sshd of the test's own needs root and {missing}")
    sshd = access.Sshd(tmp_path / "ssh", LOCAL_SOCKET)
    sshd.start()
    for key, value in sshd.env().items():
        monkeypatch.setenv(key, value)
    try:
        yield str(sshd.url)
    finally:
        sshd.close()


def test_the_local_engine_over_ssh(ssh_to_local: str, tmp_path: Path,
                                   local: docker.DockerClient) -> None:
    client = connect(parse_engine(ssh_to_local), timeout=30)
    bridge = client.bridge
    assert engine_info(client)["id"] == local.info()["ID"]
    assert shares_filesystem(client, tmp_path / "probes", DEFAULT_IMAGE) is True
    container = client.containers.run(DEFAULT_IMAGE, ["sleep", "60"], detach=True,
                                      labels={"agentbench": "1", "h2.test": "ssh"})
    try:
        # read as the sandbox reads them (docker-py's own reading loses a fast command's output
        # when it comes with the engine's answer, as it may over ssh: exec_stream.py)
        exec_id = client.api.exec_create(
            container.id, ["bash", "-c", "echo out; sleep 0.2; echo err >&2; exit 3"])["Id"]
        stream = exec_stream.start(client.api, exec_id)
        frames = list(stream.frames())
        stream.close()
        assert frames == [(1, b"out\n"), (2, b"err\n")]
        assert client.api.exec_inspect(exec_id)["ExitCode"] == 3
        for _ in range(5):
            assert exec_stream.output(client.api, client.api.exec_create(
                container.id, ["seq", "3"])["Id"]) == b"1\n2\n3\n"
    finally:
        container.remove(force=True)
    assert len(bridge._procs) <= 4  # one pool for every URL (docker-py: one per URL), a spare
    client.close()
    assert not bridge.directory.exists() and not bridge._procs
    wrong_user = ssh_to_local.replace("ssh://root@", "ssh://nobody@")
    with pytest.raises(EngineUnreachable, match=r"Permission denied"):
        connect(parse_engine(wrong_user), timeout=15)
