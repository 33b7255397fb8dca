"""Fixtures for the sandbox contract: one suite, run against every SandboxFactory.

`sandbox_factory` is parametrized over "local", "docker", "docker-archive" (the local engine
reached as a remote one: volumes and archives, no bind mount) and "remote" (the tests' second
engine over TLS, which cannot see our directories at all: tests/support/engines.py). The docker
variants use the session's `docker_sandboxes` (tests/support/sandboxes.py), which skips with the
reason when no daemon answers, except under CI (CI=true), where a missing daemon is a failure:
the docker tests must really run there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.sandbox.local import LocalSandboxFactory
from pytest_agentbench.sandbox.port import Sandbox, SandboxFactory, SandboxSpec
from tests.support.sandboxes import (
    SESSION_ID,
    SESSION_LABEL,
    MakeSandbox,
    open_labelled,
    small_spec,
)

REMOTE = pytest.param("remote", marks=pytest.mark.xdist_group("second_engine"))
DOCKER_KINDS = ["docker", "docker-archive", REMOTE]  # the isolating ones (isolation_only)


@pytest.fixture(scope="session")
def docker_archive_sandboxes(docker_sandboxes: Any) -> Iterator[Any]:
    """The local engine, reached as if it were remote: every directory shipped as a volume
    through the archive API, the file tools run in the container
    (sandbox/docker/shipped_mounts.py)."""
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    factory = DockerSandboxFactory(docker_sandboxes.client, transfer="archive")
    yield factory
    factory.close_all()
    assert factory.sweep({SESSION_LABEL: SESSION_ID}) == 0
    assert factory.remove_volumes({SESSION_LABEL: SESSION_ID}) == 0, "volumes left behind"


@pytest.fixture(scope="session")
def remote_sandboxes(second_engine: Any) -> Iterator[Any]:
    """The tests' second engine (tests/support/engines.py), reached over TLS as a Docker
    context: another daemon that cannot see our directories, so only archive transfer works."""
    from pytest_agentbench.sandbox.docker.engines import connect, parse_engine
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    client = connect(parse_engine(second_engine.context),
                     environ={**os.environ, **second_engine.env()})
    factory = DockerSandboxFactory(client, transfer="archive", engine=second_engine.context)
    factory.test_spec = second_engine.context  # type: ignore[attr-defined]
    factory.test_env = second_engine.env()  # type: ignore[attr-defined]
    yield factory
    factory.close_all()
    assert factory.sweep({SESSION_LABEL: SESSION_ID}) == 0
    assert factory.remove_volumes({SESSION_LABEL: SESSION_ID}) == 0, "volumes left behind"
    client.close()


@pytest.fixture(params=["local", *DOCKER_KINDS])
def sandbox_factory(request: pytest.FixtureRequest) -> Iterator[SandboxFactory]:
    if request.param == "local":
        local = LocalSandboxFactory()
        yield local
        local.close_all()
    elif request.param == "docker-archive":
        yield request.getfixturevalue("docker_archive_sandboxes")
    elif request.param == "remote":
        yield request.getfixturevalue("remote_sandboxes")
    else:
        yield request.getfixturevalue("docker_sandboxes")


@pytest.fixture
def base_spec(tmp_path: Path) -> SandboxSpec:
    return small_spec(tmp_path, mem_limit_mb=1024)


@pytest.fixture
def make_sandbox(sandbox_factory: SandboxFactory, base_spec: SandboxSpec) -> Iterator[MakeSandbox]:
    """Open sandboxes on a fresh workspace and env dir; all are closed (and checked gone) after."""
    with open_labelled(sandbox_factory, base_spec) as make:
        yield make


@pytest.fixture
def sandbox(make_sandbox: MakeSandbox) -> Sandbox:
    sandbox: Sandbox = make_sandbox()
    return sandbox
