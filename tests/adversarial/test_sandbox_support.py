"""Shared pieces of the test_sandbox_* tests (issue 8 items 3, 6, 8): no tests here.

`docker_sandboxes` is a session's DockerSandboxFactory (skips without Docker, fails under CI);
`make_docker_sandbox` opens labelled sandboxes on a fresh workspace and removes them after.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.sandbox.port import SandboxError, SandboxSpec

TEST_LABEL = "agentbench.test"
SESSION_LABEL = "agentbench.test_session"
SESSION_ID = uuid.uuid4().hex[:12]
MakeSandbox = Callable[..., Any]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def docker_sandboxes() -> Iterator[Any]:
    try:
        from pytest_agentbench.sandbox.docker import DockerSandboxFactory
        from pytest_agentbench.sandbox.image import ensure_image

        factory = DockerSandboxFactory()
        factory.client  # noqa: B018 - pings the daemon
        ensure_image(quiet=True)
    except (ImportError, SandboxError) as exc:
        if in_ci():
            pytest.fail(f"CI=true but the docker sandbox is unavailable: {exc}", pytrace=False)
        pytest.skip(f"no Docker daemon answers ({exc})")
    yield factory
    factory.close_all()
    assert factory.sweep({SESSION_LABEL: SESSION_ID}) == 0, "sandboxes were left behind"


@pytest.fixture
def sandbox_spec(tmp_path: Path) -> SandboxSpec:
    from pytest_agentbench.sandbox.image import DEFAULT_IMAGE

    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return SandboxSpec(image=DEFAULT_IMAGE, workspace=workspace, env_dir=tmp_path / "env",
                       cpu_limit=1.0, mem_limit_mb=512, pids_limit=256, lifetime_sec=600)


@pytest.fixture
def make_docker_sandbox(docker_sandboxes: Any, sandbox_spec: SandboxSpec) -> Iterator[MakeSandbox]:
    test_id = uuid.uuid4().hex[:12]
    opened: list[Any] = []

    def make(**overrides: Any) -> Any:
        labels = {SESSION_LABEL: SESSION_ID, TEST_LABEL: test_id, **overrides.pop("labels", {})}
        sandbox = docker_sandboxes.open(replace(sandbox_spec, labels=labels, **overrides))
        opened.append(sandbox)
        return sandbox

    yield make
    for sandbox in opened:
        sandbox.close()
    assert docker_sandboxes.sweep({TEST_LABEL: test_id}) == 0, "close() left a sandbox behind"
