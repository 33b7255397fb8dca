"""Issue 10 item 1: the shapes real setups install in, each in a real Docker sandbox whose root
file system is read-only, with the network and CA bundle a `setup_only` task's setup gets.

On 221295f the runner image set PIP_USER=1, so pip inside any virtualenv refused ("Can not
perform a '--user' install") and `--target` conflicted with it: the venv, system-site venv and
target shapes failed there. Plain `pip install x` and `pip install -e .` must still land in /env
(the per-attempt writable mount) and still import once /env is mounted read-only for the agent;
a venv made in /workspace must work in a later container of the same image.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.run.hostenv import resolve_ca_bundle
from pytest_agentbench.sandbox.port import Sandbox
from tests.support.sandboxes import MakeSandbox, in_ci, open_labelled, small_spec

PYPROJECT = """[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "demo"
version = "0.1"
"""
SETUP_TIMEOUT = 300


def pypi_answers() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=10).close()
    except OSError:
        return False
    return True


@pytest.fixture
def make(docker_sandboxes: Any, tmp_path: Path) -> Iterator[MakeSandbox]:
    if not pypi_answers():
        if in_ci():
            pytest.fail("CI=true but pypi.org does not answer", pytrace=False)
        pytest.skip("pypi.org does not answer from this machine")
    ca = resolve_ca_bundle("auto")
    spec = small_spec(tmp_path, mem_limit_mb=1024, network=True, pip_cache=tmp_path / "pip",
                      ca_bundle=Path(ca) if ca else None)
    (spec.workspace / "demo").mkdir()
    (spec.workspace / "demo" / "__init__.py").write_text("ANSWER = 42\n")
    (spec.workspace / "pyproject.toml").write_text(PYPROJECT)
    with open_labelled(docker_sandboxes, spec) as make:
        yield make


def run(sandbox: Sandbox, command: str) -> str:
    result = sandbox.exec(command, timeout_sec=SETUP_TIMEOUT)
    assert result.exit_code == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def agent_phase(make: MakeSandbox) -> Sandbox:
    """A new container of the same image, as the agent and scoring phases get: no network, /env
    mounted read-only."""
    sandbox: Sandbox = make(network=False, env_read_only=True, pip_cache=None)
    return sandbox


def test_plain_pip_installs_into_env(make: MakeSandbox, tmp_path: Path) -> None:
    run(make(), "pip install six==1.17.0 && pip install -e .")
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    assert (site / "six.py").is_file()
    assert any(p.name.startswith("demo-0.1") for p in site.iterdir())
    later = agent_phase(make)
    out = run(later, "cd /tmp && python -c 'import six, demo; print(six.__file__, demo.__file__)'")
    assert out.split() == ["/env/lib/python3.11/site-packages/six.py",
                           "/workspace/demo/__init__.py"]
    assert later.exec("pip install six==1.16.0", timeout_sec=60).exit_code != 0  # /env is r/o


def test_venv_in_the_workspace(make: MakeSandbox, tmp_path: Path) -> None:
    run(make(), "python -m venv .venv && .venv/bin/pip install -e . six==1.17.0")
    assert not (tmp_path / "env" / "lib").exists()  # nothing went to /env
    out = run(agent_phase(make), ".venv/bin/python -c 'import sys, six, demo; "
                                 "print(sys.prefix, six.__file__, demo.ANSWER)'")
    assert out.split() == ["/workspace/.venv",
                           "/workspace/.venv/lib/python3.11/site-packages/six.py", "42"]


def test_venv_with_system_site_packages(make: MakeSandbox) -> None:
    run(make(), "python -m venv --system-site-packages .venv && .venv/bin/pip install six")
    out = run(agent_phase(make), ".venv/bin/python -c 'import pytest, six; print(six.__file__)'")
    assert out.strip() == "/workspace/.venv/lib/python3.11/site-packages/six.py"


@pytest.mark.parametrize(("option", "path"), [
    ("--target /workspace/vendor", "PYTHONPATH=/workspace/vendor"),
    ("--prefix /workspace/prefix",
     "PYTHONPATH=/workspace/prefix/local/lib/python3.11/dist-packages"),
])
def test_target_and_prefix_installs(make: MakeSandbox, option: str, path: str) -> None:
    run(make(), f"pip install {option} six==1.17.0")
    out = run(agent_phase(make), f"cd /tmp && {path} python -c 'import six; print(six.__file__)'")
    assert out.strip().startswith(path.split("=")[1])
