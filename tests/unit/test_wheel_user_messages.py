"""Issue 11 item 12: what a pip user reads when Docker is missing or does not answer names what
they can do (start Docker, `agentbench doctor`), not a script only a checkout has."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import pytest_agentbench.sandbox.docker.image as image


def _for_pip_users(message: str) -> None:
    assert "agentbench doctor" in message
    assert "in a checkout of pytest-agentbench, scripts/ensure-docker" in message
    assert "run scripts/ensure-docker" not in message


def test_no_docker_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no `docker` to run
    with pytest.raises(image.ImageUnavailable) as exc:
        image.runner_image("docker", None)
    assert str(exc.value).startswith("docker CLI not found")
    _for_pip_users(str(exc.value))


def test_daemon_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("docker") is None:
        pytest.skip("no docker CLI")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(image.ImageUnavailable) as exc:
        image.runner_image("docker", None)
    assert str(exc.value).startswith("Docker daemon not reachable")
    assert "--agentbench-sandbox local" in str(exc.value)
    _for_pip_users(str(exc.value))
