"""Issue 11 item 1: the wheel carries what an installed harness needs: the runner image's build
context (its absence made `agentbench image build` say `site-packages/runner/Dockerfile not
found`), the same context hash as this checkout, and the commit it was built from."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest_agentbench.sandbox.docker.image as image
from pytest_agentbench import __version__
from tests.support.wheels import REPO, build_wheel, wheel_names


def _git_head() -> str | None:
    proc = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def test_the_wheel_carries_the_runner_context_and_its_commit(tmp_path: Path) -> None:
    before = _git_head()
    wheel = build_wheel(tmp_path / "dist")
    after = _git_head()  # others may commit meanwhile in a shared tree: either is the build's
    names = wheel_names(wheel)
    context = image.default_context()
    expected = [f"pytest_agentbench/runner/{p.relative_to(context).as_posix()}"
                for p in image.context_files(context)]
    assert "pytest_agentbench/runner/Dockerfile" in expected
    assert set(expected) <= set(names)
    assert not [n for n in names if n.startswith("runner/")]  # nothing at the top level
    assert wheel.name.startswith(f"pytest_agentbench-{__version__}-")

    unpacked = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(unpacked)
    assert image.context_hash(unpacked / "pytest_agentbench" / "runner") == \
        image.context_hash(context)

    info = (unpacked / "pytest_agentbench" / "_build_info.py").read_text()
    if before:  # built from a checkout: the wheel says which commit
        assert f"COMMIT = {before!r}" in info or f"COMMIT = {after!r}" in info, info


def test_context_hash_ignores_bytecode_litter(tmp_path: Path) -> None:
    context = tmp_path / "runner"
    context.mkdir()
    (context / "Dockerfile").write_text("FROM scratch\n")
    before = image.context_hash(context)
    (context / "__pycache__").mkdir()
    (context / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (context / "stray.pyc").write_bytes(b"\0")
    assert image.context_hash(context) == before
    (context / "entry.sh").write_text("#!/bin/sh\n")
    assert image.context_hash(context) != before


def test_the_default_context_is_inside_the_package() -> None:
    context = image.default_context()
    assert context == Path(image.__file__).resolve().parents[2] / "runner"
    assert (context / "Dockerfile").is_file()
    assert not (REPO / "runner").exists()  # one build context, the one that ships
