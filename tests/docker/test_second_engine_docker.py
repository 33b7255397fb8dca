"""Engines against the tests' second Docker daemon (tests/support/engines.py), which cannot see
our directories: reached as a TLS Docker context, through DOCKER_HOST with TLS, by its tcp:// URL
with DOCKER_CERT_PATH and over ssh://; the filesystem probe says no; the runner image is streamed
to it and checked; doctor and gc name it. One engine per session: the xdist group."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from pytest_agentbench.cli.doctor import run_doctor
from pytest_agentbench.cli.doctor_engines import check_engine, gc_engine, isolation_problem
from pytest_agentbench.sandbox.docker.engines import (
    EngineUnreachable,
    connect,
    engine_info,
    parse_engine,
    shares_filesystem,
)
from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE
from pytest_agentbench.sandbox.docker.image_transfer import ensure_image_on
from tests.support.engine_access import make_certs

pytestmark = pytest.mark.xdist_group("second_engine")


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment with no DOCKER_* of ours, plus `extra`."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}, **extra}


@pytest.fixture
def second(second_engine: Any) -> Iterator[docker.DockerClient]:
    """A client for the second engine through its TLS context."""
    client = connect(parse_engine(second_engine.context), environ=clean_env(second_engine.env()))
    yield client
    client.close()


def test_reached_through_tls_every_way(second_engine: Any, second: docker.DockerClient,
                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine_id = engine_info(second)["id"]
    assert engine_id != engine_info(docker.from_env())["id"]
    port_url = second_engine.tls_url
    ways = [("default", second_engine.env()),  # DOCKER_CONTEXT in that DOCKER_CONFIG
            ("default", second_engine.tls_env()),  # DOCKER_HOST + DOCKER_TLS_VERIFY
            (port_url, {"DOCKER_CERT_PATH": str(second_engine.tls_dir)})]
    # behind a TLS-intercepting proxy: a CA bundle and a proxy in the environment are ignored
    # (requests would verify the engine against that bundle and send the engine's traffic to
    # the proxy); the engine's own CA and a direct connection are used
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    for text, env in ways:
        client = connect(parse_engine(text), timeout=20, environ=clean_env(env))
        assert engine_info(client)["id"] == engine_id, text
        client.close()
    with pytest.raises(ValueError, match="has no TLS"):
        connect(parse_engine(port_url), environ=clean_env({}))
    _, strangers = make_certs(tmp_path / "other-ca")
    with pytest.raises(EngineUnreachable, match=r"TLS: the engine's certificate is not signed"):
        connect(parse_engine(port_url), timeout=10,
                environ=clean_env({"DOCKER_CERT_PATH": str(strangers)}))
    ca_only = tmp_path / "ca-only"
    ca_only.mkdir()
    shutil.copy(second_engine.tls_dir / "ca.pem", ca_only / "ca.pem")
    with pytest.raises(EngineUnreachable, match=r"TLS: the engine (wants|refused)"):
        connect(parse_engine(port_url), timeout=10,
                environ=clean_env({"DOCKER_CERT_PATH": str(ca_only)}))
    with pytest.raises(EngineUnreachable) as info:  # plain HTTP to a TLS port
        connect(parse_engine(f"{port_url},tls=off"), timeout=10, environ=clean_env({}))
    assert str(info.value).startswith(f"engine {port_url}: unreachable (")


def test_reached_over_ssh(second_engine: Any, second: docker.DockerClient, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The ssh bridge (sandbox/docker/ssh_bridge.py) to the engine, and doctor's whole check through
    it: image, filesystem probe, a policy container's exec (hijacked socket over ssh)."""
    for key, value in second_engine.ssh_env().items():
        monkeypatch.setenv(key, value)
    start = time.monotonic()
    client = connect(parse_engine(second_engine.ssh_url), timeout=20)
    took = time.monotonic() - start
    assert engine_info(client)["id"] == engine_info(second)["id"]
    client.close()
    print(f"connect over ssh (preflight + ping): {took:.2f}s")
    ok, line = check_engine(parse_engine(second_engine.ssh_url), None, tmp_path)
    assert ok and " present, transfer archive (probe " in line, line
    assert line.endswith(", isolation ok"), line
    wrong = second_engine.ssh_url.rsplit(":", 1)[0] + ":1"
    with pytest.raises(EngineUnreachable, match="Connection refused"):
        connect(parse_engine(wrong), timeout=10)


def test_the_second_engine_does_not_see_our_directories(tmp_path: Path,
                                                        second: docker.DockerClient) -> None:
    start = time.monotonic()
    assert shares_filesystem(second, tmp_path / "probes") is False
    print(f"shares_filesystem on the second engine: {time.monotonic() - start:.3f}s")
    assert list((tmp_path / "probes").iterdir()) == []
    assert second.api.containers(all=True, filters={"label": "agentbench.probe=1"}) == []


def test_the_runner_image_is_streamed_to_it_and_checked(second: docker.DockerClient) -> None:
    local = docker.from_env(timeout=600)
    found = ensure_image_on(second, DEFAULT_IMAGE, source=local)
    assert found["how"] == "present"
    second.api.remove_image(found["id"], force=True)
    with pytest.raises(Exception, match="is on neither engine"):
        ensure_image_on(second, DEFAULT_IMAGE, source=None)
    moved = ensure_image_on(second, DEFAULT_IMAGE, source=local)
    print(f"runner image transfer over TLS: {moved['bytes'] / 1e6:.0f} MB in "
          f"{moved['seconds']:.1f}s")
    assert moved["how"] == "transferred" and moved["id"] == found["id"]
    assert moved["context_hash"] == found["context_hash"] and moved["bytes"] > 100e6
    tags = second.api.inspect_image(DEFAULT_IMAGE)["RepoTags"]
    assert DEFAULT_IMAGE in tags and f"agentbench/py-runner:ctx-{found['context_hash']}" in tags
    assert ensure_image_on(second, DEFAULT_IMAGE, source=local)["how"] == "present"
    assert isolation_problem(second, DEFAULT_IMAGE) is None


def test_doctor_names_the_second_engine(second_engine: Any,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(second_engine.docker_config))
    lines: list[str] = []
    name = second_engine.context
    assert run_doctor(build=False, write=lines.append, engines=[parse_engine(name)]) == 0, lines
    assert lines[0].startswith(f"PASS engine {name}: reachable (Docker "), lines
    assert " present, transfer archive (probe " in lines[0] and lines[0].endswith("isolation ok")
    lines.clear()
    assert run_doctor(build=False, write=lines.append,
                      engines=[parse_engine(f"{name},transfer=bind")]) == 1
    assert "transfer bind impossible: the engine does not see" in lines[0], lines


def test_gc_on_the_second_engine(second_engine: Any, second: docker.DockerClient,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    labels = {"agentbench": "1", "h2.test": "gc"}
    volume = second.api.create_volume(None, labels=labels)["Name"]
    container = second.api.create_container(DEFAULT_IMAGE, command=["true"], labels=labels)
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(second_engine.docker_config))
    caches = [v for v in second.api.volumes()["Volumes"] or []
              if "agentbench.cache" in (v.get("Labels") or {})]  # pip caches of earlier runs
    line = gc_engine(parse_engine(second_engine.context), None)
    kept = f" (kept: {len(caches)} cache)" if caches else ""
    assert line == f"engine {second_engine.context}: removed 1 container(s), 1 volume(s){kept}", \
        line
    assert second.api.containers(all=True, filters={"id": container["Id"]}) == []
    assert volume not in {v["Name"] for v in second.api.volumes()["Volumes"] or []}


def test_doctor_copies_the_runner_image_to_an_engine_without_it(
        second_engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh engine of its own (no image): missing under --no-build, then transferred."""
    from tests.support.engines import open_engine

    fresh = open_engine(None)
    try:
        monkeypatch.delenv("DOCKER_HOST", raising=False)
        monkeypatch.setenv("DOCKER_CONFIG", str(fresh.docker_config))
        # `default` (the image's source) stays the local engine: that store's current context
        # is the fresh engine, DOCKER_CONTEXT overrides it as for the docker CLI
        monkeypatch.setenv("DOCKER_CONTEXT", "default")
        lines: list[str] = []
        specs = [parse_engine(fresh.context)]
        assert run_doctor(build=False, write=lines.append, engines=specs) == 1
        assert lines == [
            f"FAIL engine {fresh.context}: reachable (Docker " + lines[0].split("(Docker ")[1]]
        assert ("runner image missing (not copied from the default engine: --no-build), "
                "transfer archive (probe ") in lines[0]
        assert lines[0].endswith("isolation not checked (no runner image)"), lines
        lines.clear()
        assert run_doctor(build=True, write=lines.append, engines=specs) == 0, lines
        assert " transferred in " in lines[0] and " MB), transfer archive (probe " in lines[0]
        print(lines[0])
    finally:
        fresh.close()
