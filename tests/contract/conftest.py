"""Fixtures for the sandbox contract: one suite, run against every SandboxFactory.

`sandbox_factory` is parametrized over "local" and "docker". The docker variant is marked `docker`
and skips (with the reason) when no daemon answers, except under CI (CI=true), where a missing
daemon is a failure: the docker tests must really run there.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.sandbox.local import LocalSandboxFactory
from pytest_agentbench.sandbox.port import Sandbox, SandboxError, SandboxFactory, SandboxSpec

SESSION_LABEL = "agentbench.test_session"
TEST_LABEL = "agentbench.test"
SESSION_ID = uuid.uuid4().hex[:12]

MakeSandbox = Callable[..., Sandbox]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def docker_factory() -> Iterator[Any]:
    """A DockerSandboxFactory with the runner image present; skips (fails in CI) without Docker."""
    try:
        from pytest_agentbench.sandbox.docker import DockerSandboxFactory
        from pytest_agentbench.sandbox.image import ensure_image

        factory = DockerSandboxFactory()
        factory.client  # noqa: B018 - pings the daemon
        ensure_image(quiet=True)
    except (ImportError, SandboxError) as exc:
        if in_ci():
            pytest.fail(f"CI=true but the docker sandbox is unavailable: {exc}", pytrace=False)
        pytest.skip(f"no Docker daemon answers ({exc}); run scripts/ensure-docker")
    yield factory
    factory.close_all()
    leaked = factory.sweep({SESSION_LABEL: SESSION_ID})
    assert leaked == 0, f"{leaked} sandbox container(s) of this test session were left behind"


@pytest.fixture(params=["local", "docker"])
def sandbox_factory(request: pytest.FixtureRequest) -> Iterator[SandboxFactory]:
    if request.param == "local":
        local = LocalSandboxFactory()
        yield local
        local.close_all()
    else:
        yield request.getfixturevalue("docker_factory")


@pytest.fixture
def base_spec(tmp_path: Path) -> SandboxSpec:
    from pytest_agentbench.sandbox.image import DEFAULT_IMAGE

    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return SandboxSpec(image=DEFAULT_IMAGE, workspace=workspace, env_dir=tmp_path / "env",
                       cpu_limit=1.0, mem_limit_mb=1024, pids_limit=256, lifetime_sec=600)


@pytest.fixture
def make_sandbox(sandbox_factory: SandboxFactory, base_spec: SandboxSpec) -> Iterator[MakeSandbox]:
    """Open sandboxes on a fresh workspace and env dir; all are closed (and checked gone) after."""
    test_id = uuid.uuid4().hex[:12]
    opened: list[Sandbox] = []

    def make(**overrides: Any) -> Sandbox:
        labels = {SESSION_LABEL: SESSION_ID, TEST_LABEL: test_id, **overrides.pop("labels", {})}
        sandbox = sandbox_factory.open(replace(base_spec, labels=labels, **overrides))
        opened.append(sandbox)
        return sandbox

    yield make
    for sandbox in opened:
        sandbox.close()
    assert sandbox_factory.sweep({TEST_LABEL: test_id}) == 0, "close() left a sandbox behind"


@pytest.fixture
def sandbox(make_sandbox: MakeSandbox) -> Sandbox:
    return make_sandbox()
