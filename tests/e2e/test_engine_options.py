"""Bad `--agentbench-engine` values stop a run before it starts: one line naming the value and
what is wrong, exit status 4 (usage), no traceback, no run directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DOCKER_"))}
    env["DOCKER_CONFIG"] = str(tmp_path / "docker-config")  # no contexts of the caller's
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--agentbench-suite",
         "custom-dev", f"--agentbench-out={tmp_path / 'out'}", "-k", "fix-mean", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("spec, words", [
    ("tcp://127.0.0.1:9,slots=2", "has no TLS"),
    ("no-such-context", "no-such-context"),
    ("tcp://127.0.0.1:9,tls=off", "unreachable"),
    ("default,slots=zero", "slots"),
    ("http://127.0.0.1:2375", "http"),
])
def test_a_bad_engine_is_one_line_and_no_run(tmp_path: Path, docker_client: object, spec: str,
                                             words: str) -> None:
    done = _run(tmp_path, f"--agentbench-engine={spec}")
    text = done.stdout + done.stderr
    assert done.returncode == 4, text[-2000:]
    errors = [line for line in text.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and words in errors[0], text[-2000:]
    assert "Traceback" not in text
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
