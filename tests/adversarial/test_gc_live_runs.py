"""Issue 20 item 6 (and the `doctor`/`gc` part of item 8): `agentbench gc` removed every
agentbench container, a live run's too (only volumes of a live owner were spared), and the live
attempt ended SANDBOX_ERROR; `doctor` counted the containers of a live run whose creating
process was gone (a worker that died, its controller still running and due to sweep them) as
leftovers and failed. Now neither gc nor doctor touches or counts what a live run owns (its
creator alive, or another process of its run), unless `gc --force`.

Real containers and volumes on the default engine, labelled as a live run's (its creator is this
test process), as the same live run's whose worker died, and as a dead run's. Every command here
is narrowed to this test's own label (`gc --label`), so it never removes what tests beside it
made.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE

ROOT = Path(__file__).resolve().parents[2]
DEAD_PID = 999_999_999  # above any pid_max: no such process


ROLES = ("live", "orphan", "dead")


@pytest.fixture
def made(docker_sandboxes: Any, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """role -> (container id, volume name), for the roles the test names (ROLES by default),
    and the test's tag. A dead run's container lives only as long as the test needs it: a
    `doctor` beside this test would rightly count it."""
    client = docker_sandboxes.client
    tag, here = uuid.uuid4().hex[:10], socket.gethostname()
    live_run, dead_run = f"gc-live-{tag}", f"gc-dead-{tag}"
    owners = {
        "live": (f"{here}:{os.getpid()}", live_run),  # a live run's sandbox
        "orphan": (f"{here}:{DEAD_PID}", live_run),  # the same live run, its worker gone
        "dead": (f"{here}:{DEAD_PID}", dead_run),  # a run that ended without its sweep
    }
    roles = getattr(request, "param", ROLES)
    found: dict[str, Any] = {"tag": tag}
    try:
        for role in roles:
            owner, run_id = owners[role]
            labels = {"agentbench": "1", "agentbench.owner": owner, "agentbench.run_id": run_id,
                      "h20.gc": tag}
            volume = client.api.create_volume(None, labels=labels)["Name"]
            container = client.containers.run(DEFAULT_IMAGE, ["sleep", "300"], detach=True,
                                              labels=labels, user="70000:70000")
            found[role] = (container.id, volume)
        yield found
    finally:
        for role in roles:
            container_id, volume = found.get(role, (None, None))
            with contextlib.suppress(Exception):
                client.api.remove_container(container_id, force=True)
            with contextlib.suppress(Exception):
                client.api.remove_volume(volume)


def gc(tag: str, *extra: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_agentbench.cli.main", "gc", "--label", f"h20.gc={tag}",
         *extra], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    return proc.stdout.strip()


def left(client: Any, tag: str) -> tuple[set[str], set[str]]:
    containers = client.api.containers(all=True, filters={"label": f"h20.gc={tag}"})
    volumes = client.api.volumes(filters={"label": f"h20.gc={tag}"}).get("Volumes") or []
    return {c["Id"] for c in containers}, {v["Name"] for v in volumes}


def test_item6_gc_spares_a_live_runs_containers_and_volumes_unless_forced(
    docker_sandboxes: Any, made: dict[str, Any]
) -> None:
    client, tag = docker_sandboxes.client, made["tag"]
    line = gc(tag)
    containers, volumes = left(client, tag)
    for role in ("live", "orphan"):
        container_id, volume = made[role]
        assert container_id in containers, (role, line)
        assert client.api.inspect_container(container_id)["State"]["Running"], role
        assert volume in volumes, (role, line)
    assert made["dead"][0] not in containers and made["dead"][1] not in volumes, line
    assert "removed 1 container(s), 1 volume(s)" in line, line
    assert "2 live run's container" in line, line

    line = gc(tag, "--force")
    assert left(client, tag) == (set(), set()), line
    assert "removed 2 container(s), 2 volume(s)" in line, line


@pytest.mark.parametrize("made", [("live", "orphan")], indirect=True)
def test_item8_doctor_counts_no_live_runs_container_as_a_leftover(
    docker_sandboxes: Any, made: dict[str, Any]
) -> None:
    from pytest_agentbench.cli.doctor import _check_leftovers

    class Narrowed:  # the engine's containers, as doctor lists them, but only this test's
        @staticmethod
        def containers(labels: dict[str, str]) -> list[dict[str, Any]]:
            return list(docker_sandboxes.containers({**labels, "h20.gc": made["tag"]}))

    lines: list[tuple[bool, str, str]] = []
    _check_leftovers(lambda ok, name, detail: lines.append((ok, name, detail)), Narrowed())
    assert lines == [(True, "leftover containers", "0 leftover, 2 in use by live runs")]
