"""`agentbench doctor` passes on a machine with a working engine, and fails with one clear line
when no daemon answers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pytest_agentbench.cli.doctor import run_doctor


def daemon_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=10).ping()
    except Exception:  # noqa: BLE001
        return False
    return True


def test_doctor_passes_here() -> None:
    if not daemon_answers():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("CI=true but no Docker daemon answers", pytrace=False)
        pytest.skip("no Docker daemon answers; run scripts/ensure-docker")
    lines: list[str] = []
    code = run_doctor(write=lines.append)
    assert code == 0, "\n".join(lines)
    checks = [line.split(":")[0] for line in lines]
    assert all(line.startswith("PASS ") for line in lines), lines
    for check in ("PASS docker daemon", "PASS runner image", "PASS sandbox",
                  "PASS network isolation", "PASS leftover containers", "PASS engine default"):
        assert check in checks
    engine = next(line for line in lines if line.startswith("PASS engine default:"))
    assert ", transfer bind (probe " in engine and engine.endswith(", isolation ok"), engine
    assert any(c.startswith("PASS disk space") for c in checks)


def test_doctor_without_a_daemon_says_so_in_one_line() -> None:
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent.sock"}
    proc = subprocess.run(
        [sys.executable, "-c",
         "from pytest_agentbench.cli.doctor import run_doctor; raise SystemExit(run_doctor())"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode != 0
    assert proc.stdout.splitlines() == [
        "FAIL docker daemon: not reachable at unix:///nonexistent.sock "
        "(start Docker, or set DOCKER_HOST; in a checkout of pytest-agentbench, "
        "scripts/ensure-docker starts it)"
    ]
    assert "Traceback" not in proc.stderr
