"""Fixtures of the adversarial tier.

`sandbox_spec` and `make_docker_sandbox` open labelled sandboxes on a fresh workspace in the
session's `docker_sandboxes` (tests/support/sandboxes.py: skips without Docker, fails under CI)
and remove them after (the test_sandbox_* tests, issue 8 items 3, 6, 8). `sandbox_kind` is a
local and a Docker sandbox factory in turn (the test_diff_* tests, issue 8 item 0).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.sandbox.local import LocalSandboxFactory
from pytest_agentbench.sandbox.port import SandboxFactory, SandboxSpec
from tests.support.sandboxes import MakeSandbox, open_labelled, small_spec


@pytest.fixture
def sandbox_spec(tmp_path: Path) -> SandboxSpec:
    return small_spec(tmp_path)


@pytest.fixture
def make_docker_sandbox(docker_sandboxes: Any, sandbox_spec: SandboxSpec) -> Iterator[MakeSandbox]:
    with open_labelled(docker_sandboxes, sandbox_spec) as make:
        yield make


@pytest.fixture(params=["local", "docker"])
def sandbox_kind(request: pytest.FixtureRequest) -> Iterator[tuple[str, SandboxFactory]]:
    if request.param == "local":
        local = LocalSandboxFactory()
        yield "local", local
        local.close_all()
    else:
        yield "docker", request.getfixturevalue("docker_sandboxes")
