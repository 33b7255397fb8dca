"""Fixtures for the sandbox contract: one suite, run against every SandboxFactory.

`sandbox_factory` is parametrized over "local" and "docker". The docker variant uses the
session's `docker_sandboxes` (tests/support/sandboxes.py), which skips with the reason when no
daemon answers, except under CI (CI=true), where a missing daemon is a failure: the docker tests
must really run there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_agentbench.sandbox.local import LocalSandboxFactory
from pytest_agentbench.sandbox.port import Sandbox, SandboxFactory, SandboxSpec
from tests.support.sandboxes import MakeSandbox, open_labelled, small_spec


@pytest.fixture(params=["local", "docker"])
def sandbox_factory(request: pytest.FixtureRequest) -> Iterator[SandboxFactory]:
    if request.param == "local":
        local = LocalSandboxFactory()
        yield local
        local.close_all()
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
