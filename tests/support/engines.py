"""The tests' second Docker engine, a stand-in for a remote machine, and its session fixture.

`second_engine` (registered in tests/conftest.py) yields a `SecondEngine`: a dockerd of its own
(tests/support/dockerd.py) that cannot see the controller's directories, with the runner image
loaded, reachable four ways:

    unix_host       unix://<root>/docker.sock, from the host (DOCKER_HOST=unix_host)
    tls_url         tcp://127.0.0.1:PORT, TLS with client certificates in tls_dir
                    (DOCKER_HOST=tls_url DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=tls_dir: tls_env())
    context         a Docker context in docker_config, its current one (env(): DOCKER_CONFIG)
    ssh_url         ssh://root@127.0.0.1:PORT (ssh_env(): HOME=ssh_home and PATH with its ssh)

One per test session: the tests that use it are marked `@pytest.mark.xdist_group("second_engine")`
and scripts/test runs `--dist loadgroup`, so they share one xdist worker and one engine. Without
root or the tools it skips with the reason, under CI=true it fails.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.dockerd import TOOLS, Dockerd, cannot_run_a_container, load_image, new_root
from tests.support.engine_access import TOOLS as ACCESS_TOOLS
from tests.support.engine_access import Sshd, make_certs, make_context
from tests.support.host_state import HostState
from tests.support.sandboxes import in_ci


@dataclass
class SecondEngine:
    """A running second engine and every way to reach it (module docstring); `stop()` and
    `start()` take its dockerd away and bring it back (same data root, image and endpoints),
    `close()` removes every trace."""

    daemon: Dockerd
    sshd: Sshd
    tls_dir: Path
    context: str
    docker_config: Path
    host_before: HostState  # the host and the main engine before this engine started
    timings: dict[str, float] = field(default_factory=dict)  # seconds: start, image_load

    @property
    def unix_host(self) -> str:
        return self.daemon.host

    @property
    def tls_url(self) -> str:
        return self.daemon.tls_url

    @property
    def ssh_url(self) -> str:
        return self.sshd.url

    @property
    def ssh_home(self) -> Path:
        return self.sshd.home

    def env(self) -> dict[str, str]:
        """Environment additions for a subprocess that reaches the engine through its context:
        DOCKER_CONFIG (the context is current there) and DOCKER_CONTEXT; a DOCKER_HOST in the
        subprocess's environment would override both, so drop it."""
        return {"DOCKER_CONFIG": str(self.docker_config), "DOCKER_CONTEXT": self.context}

    def tls_env(self) -> dict[str, str]:
        """The same through DOCKER_HOST and the DOCKER_TLS_VERIFY/DOCKER_CERT_PATH convention."""
        return {"DOCKER_HOST": self.tls_url, "DOCKER_TLS_VERIFY": "1",
                "DOCKER_CERT_PATH": str(self.tls_dir)}

    def ssh_env(self) -> dict[str, str]:
        """HOME and PATH (its ssh wrapper first) for `docker -H <ssh_url>` or docker-py with
        `use_ssh_client=True`; add DOCKER_HOST=ssh_url to make it the default engine."""
        return self.sshd.env()

    def stop(self) -> None:
        self.daemon.stop()

    def start(self) -> None:
        self.daemon.start()

    def close(self) -> None:
        self.sshd.close()
        self.daemon.close()


def open_engine(image: str | None = None) -> SecondEngine:
    """Start a second engine with every endpoint; load `image` into it when given. Closes what
    it started when a step fails."""
    root = new_root()
    started = time.monotonic()
    host_before = HostState.now()
    try:
        server_tls, client = make_certs(root / "tls")
        daemon = Dockerd(root, tls=server_tls)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    sshd = Sshd(root / "ssh", daemon.host)
    engine = SecondEngine(daemon, sshd, client, f"ab-second-{secrets.token_hex(3)}",
                          root / "docker-config", host_before)
    try:
        daemon.start()
        make_context(engine.docker_config, engine.context, daemon.tls_url, client)
        sshd.start()
        engine.timings["start"] = time.monotonic() - started
        if image is not None:
            loading = time.monotonic()
            load_image(daemon, image)
            engine.timings["image_load"] = time.monotonic() - loading
    except BaseException:
        engine.close()
        raise
    return engine


def missing_tools() -> list[str]:
    return [tool for tool in (*TOOLS, *ACCESS_TOOLS, "docker") if not shutil.which(tool)]


@pytest.fixture(scope="session")
def second_engine(docker_sandboxes: object) -> Iterator[SecondEngine]:
    """The session's second engine with the runner image (module docstring)."""
    from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE

    missing = missing_tools()
    if os.geteuid() != 0 or missing:
        reason = f"a second Docker engine needs root and {missing or 'its tools'}"
        if in_ci():
            pytest.fail(f"CI=true but {reason}", pytrace=False)
        pytest.skip(reason)
    failure = None
    for _ in range(2):
        engine = open_engine(DEFAULT_IMAGE)
        failure = cannot_run_a_container(engine.daemon)
        if failure is None:
            break
        # the test's own engine is broken (seen once under load: its containerd served no
        # tasks service), which says nothing about the harness: build it afresh, once
        engine.close()
    else:
        raise RuntimeError(f"the tests' second engine cannot run a container: {failure}")
    print(f"second engine: started in {engine.timings['start']:.1f}s, runner image loaded in "
          f"{engine.timings['image_load']:.1f}s")
    try:
        yield engine
    finally:
        engine.close()
    assert not engine.daemon.root.exists(), f"{engine.daemon.root} left behind"
    after = HostState.now()  # what nothing else in the session changes: docker0, iptables
    assert after.links.get("docker0") == engine.host_before.links.get("docker0")
    assert not engine.host_before.iptables - after.iptables
