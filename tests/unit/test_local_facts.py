"""The local sandbox's OS facts (FACTS_SCRIPT: python, pip, pytest and git versions; `python -m
pytest --version` loads every plugin, 0.3 s) are probed once per process for one environment, and
again when the environment is another: other variables, or the env dir's bin or lib changed (a
setup made a venv there or installed into it)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

import pytest_agentbench.sandbox.local as local
from pytest_agentbench.sandbox.port import SandboxSpec


def counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    ran: list[str] = []
    real = local.LocalSandbox.exec

    def exec_(self: Any, command: str, **kwargs: Any) -> Any:
        ran.append(command)
        return real(self, command, **kwargs)

    monkeypatch.setattr(local.LocalSandbox, "exec", exec_)
    monkeypatch.setattr(local, "_FACTS", {})
    return ran


def sandbox(tmp_path: Path, workspace: str, env_dir: Path, **env: str) -> local.LocalSandbox:
    (tmp_path / workspace).mkdir(exist_ok=True)
    return local.LocalSandbox(SandboxSpec(image="local", workspace=tmp_path / workspace,
                                          env_dir=env_dir, env=env))


def test_one_probe_for_one_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = counting(monkeypatch)
    env_dir = tmp_path / "env"
    first = sandbox(tmp_path, "repo", env_dir).facts()
    second = sandbox(tmp_path, "pristine", env_dir).facts()
    assert ran == [local.FACTS_SCRIPT]
    assert first["os"] == second["os"] and "Python" in first["os"]["python"]
    assert second["workdir"].endswith("pristine")  # the sandbox's own part is its own


def test_another_environment_is_probed_again(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    ran = counting(monkeypatch)
    env_dir = tmp_path / "env"
    before = sandbox(tmp_path, "repo", env_dir).facts()
    sandbox(tmp_path, "repo", env_dir, EXTRA="1").facts()
    assert len(ran) == 2
    # a setup puts a python of its own in the env dir's bin: found first on PATH
    (env_dir / "bin").mkdir()
    fake = env_dir / "bin" / "python"
    fake.write_text("#!/bin/sh\necho 'Python 0.0.1 (made by a setup)'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    after = sandbox(tmp_path, "repo", env_dir).facts()
    assert len(ran) == 3
    assert after["os"]["python"] != before["os"]["python"]
    assert "0.0.1" in after["os"]["python"]
    os.utime(env_dir / "bin", ns=(1, 1))  # anything in bin changed: probed again
    sandbox(tmp_path, "repo", env_dir).facts()
    assert len(ran) == 4
