"""Issue 10 item 4: the sandbox user is a uid of the harness's own, the same in the image, the
sandbox policy and the host-side hand-over, and outside every range a person or a system
package gets (pytest_agentbench/runner/Dockerfile says which)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pytest_agentbench.run.hostenv as hostenv
import pytest_agentbench.sandbox.docker.policy as policy

DOCKERFILE = Path(__file__).resolve().parents[2] / "pytest_agentbench" / "runner" / "Dockerfile"


def test_image_policy_and_host_agree() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(rf"useradd --uid {policy.SANDBOX_UID} --gid {policy.SANDBOX_GID}\b", text)
    assert f"groupadd --gid {policy.SANDBOX_GID} " in text
    assert hostenv.SANDBOX_UID == policy.SANDBOX_UID == policy.SANDBOX_GID


def test_the_uid_is_nobody_elses() -> None:
    uid = policy.SANDBOX_UID
    taken = [range(0, 60000),  # system accounts and login.defs' people (1000-59999)
             range(60000, 65000),  # Debian's global allocation
             range(61184, 65520),  # systemd's dynamic users
             range(65534, 65536)]  # nobody, (uid_t)-1 of 16-bit ids
    assert not any(uid in r for r in taken) and uid < 100000  # subuid ranges start at 100000


def test_pip_user_is_not_forced() -> None:
    """PIP_USER=1 makes pip in any venv refuse; PIP_USER=0 would forbid the /env default."""
    env_lines = [line for line in DOCKERFILE.read_text().splitlines()
                 if not line.lstrip().startswith("#")]
    assert not any("PIP_USER" in line for line in env_lines)
    assert "PYTHONUSERBASE=/env" in "\n".join(env_lines)


def test_a_root_harness_runs_commands_as_the_sandbox_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy.os, "geteuid", lambda: 0)
    assert policy.sandbox_user() == (70000, 70000)
    monkeypatch.setattr(hostenv.os, "geteuid", lambda: 0)
    assert hostenv.owner_uid("docker") == 70000 and hostenv.owner_uid("local") is None
