"""An installed program on an engine that takes archives (sandbox/docker/kept_copies.py): shipped to
the engine once and kept there, root-owned and read-only in every agent sandbox; a copy cut off
before its marker is filled again; a directory without a cache key is shipped per sandbox.
The local engine stands in for a remote one (DockerSandboxFactory(transfer="archive"))."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import Any

import pytest
from docker.types import Mount

from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory
from pytest_agentbench.sandbox.docker.kept_copies import MARKER, kept_volume_name
from pytest_agentbench.sandbox.port import ExtraMount
from tests.support.sandboxes import open_labelled, small_spec

TARGET = "/opt/agentbench/program"


@pytest.fixture
def archive_engine(docker_sandboxes: Any) -> Any:
    factory = DockerSandboxFactory(transfer="archive")
    yield factory
    factory.close_all()


def _program(tmp_path: Path) -> Path:
    program = tmp_path / "program"
    (program / "bin").mkdir(parents=True)
    (program / "bin" / "hi").write_text("#!/bin/sh\necho hello v1\n")
    (program / "bin" / "hi").chmod(0o700)
    program.chmod(0o700)  # as an install's staging directory is
    return program


def test_an_installed_program_is_shipped_once_per_engine(tmp_path: Path,
                                                         archive_engine: Any) -> None:
    program, key = _program(tmp_path), f"test-{uuid.uuid4().hex}"
    mount = ExtraMount(program, TARGET, "AGENTBENCH_PROGRAM_DIR", cache_key=key)
    api = archive_engine.client.api
    try:
        with open_labelled(archive_engine, small_spec(tmp_path, extra_mounts=(mount,))) as make:
            first = make()
            ran = first.exec('"$AGENTBENCH_PROGRAM_DIR/bin/hi" && stat -c "%u %a" '
                             '"$AGENTBENCH_PROGRAM_DIR" "$AGENTBENCH_PROGRAM_DIR/bin/hi" && '
                             '( : > "$AGENTBENCH_PROGRAM_DIR/planted" ) 2>&1; true',
                             timeout_sec=60)
            assert ran.stdout.split("\n")[:3] == ["hello v1", "0 755", "0 755"], ran.stdout
            assert "Read-only file system" in ran.stdout or "denied" in ran.stdout, ran.stdout
            # the host's directory changes under the same key: the engine's copy is kept
            (program / "bin" / "hi").write_text("#!/bin/sh\necho hello v2\n")
            second = make()
            assert second.exec('"$AGENTBENCH_PROGRAM_DIR/bin/hi"',
                               timeout_sec=60).stdout.strip() == "hello v1"
            facts = second.facts()["create_args"]["mounts"]
            assert {"target": TARGET, "type": "volume", "source": "<AGENTBENCH_PROGRAM_DIR>",
                    "read_only": True} in facts
        # a copy cut off before its marker (here: the marker taken away) is filled again
        archive_engine.client.containers.run(
            first.spec.image, ["rm", f"/copy/{MARKER}"], user="0:0", remove=True,
            network_mode="none", mounts=[Mount("/copy", kept_volume_name(key), type="volume")])
        (tmp_path / "again").mkdir()
        with open_labelled(archive_engine, small_spec(tmp_path / "again", extra_mounts=(
                mount,))) as make:
            assert make().exec('"$AGENTBENCH_PROGRAM_DIR/bin/hi"',
                               timeout_sec=60).stdout.strip() == "hello v2"
        # the volume outlives its sandboxes (sweeps spare it)
        labels = api.inspect_volume(kept_volume_name(key))["Labels"]
        assert labels["agentbench.cache"] == "program"
    finally:
        with contextlib.suppress(Exception):
            api.remove_volume(kept_volume_name(key), force=True)


def test_a_program_directory_without_a_key_is_shipped_per_sandbox(tmp_path: Path,
                                                                  archive_engine: Any) -> None:
    program = _program(tmp_path)
    mount = ExtraMount(program, TARGET, "AGENTBENCH_PROGRAM_DIR")
    with open_labelled(archive_engine, small_spec(tmp_path, extra_mounts=(mount,))) as make:
        assert make().exec('"$AGENTBENCH_PROGRAM_DIR/bin/hi"',
                           timeout_sec=60).stdout.strip() == "hello v1"
        (program / "bin" / "hi").write_text("#!/bin/sh\necho hello v2\n")
        assert make().exec('"$AGENTBENCH_PROGRAM_DIR/bin/hi"',
                           timeout_sec=60).stdout.strip() == "hello v2"
