"""Fixtures of the end-to-end tests; the run helpers are in tests/support/plugin_runs.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.sandboxes import in_ci


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A docker-py client with a daemon that answers; skips without one, fails under CI=true."""
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the daemon means "no Docker"
        if in_ci():
            pytest.fail(f"CI=true but no Docker daemon answers: {exc}", pytrace=False)
        pytest.skip(
            f"no Docker daemon answers ({type(exc).__name__}: {exc}); run scripts/ensure-docker"
        )
    yield client
    client.close()
