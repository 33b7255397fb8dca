"""Issue 22 items 2 and 4: a Docker daemon that does not answer. Every command that needs the
runner image says so in one line and stops at once: it never debootstraps a base it cannot
import, never hangs on the tar that feeds `docker import`, and a run exits 10 (infrastructure),
not 4 (the README's "bad option").

The daemon is made unreachable with DOCKER_HOST naming a socket that does not exist (the real
docker CLI answers as it does with a stopped daemon); the Debian mirror is a closed loopback
port, so a harness that still tried to debootstrap fails fast instead of downloading 200 MB.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.plugin_runs import TASKPACKS, run_env

DEAD_DAEMON = "unix:///nonexistent/agentbench-test/docker.sock"
INFRA_ERROR = 10


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = run_env(tmp_path / "home")
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env.update(DOCKER_HOST=DEAD_DAEMON, TMPDIR=str(tmp_path / "tmp"), AGENTBENCH_BASE="auto",
               AGENTBENCH_DEBIAN_MIRROR="http://127.0.0.1:9/debian", **extra)
    return env


def _agentbench(tmp_path: Path, *args: str, timeout: float = 120) -> tuple[int, str, float]:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_agentbench.cli.main", *args], env=_env(tmp_path),
        cwd=tmp_path, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


def _one_line_about_the_daemon(text: str) -> None:
    assert "Traceback" not in text, text
    assert "Docker daemon not reachable" in text, text
    assert "debootstrap" not in text, text
    assert len([line for line in text.splitlines() if "Docker daemon" in line]) == 1, text


def test_validate_run_with_the_daemon_down(tmp_path: Path) -> None:
    """Issue 22 item 2: `validate-tasks --run` printed nothing, debootstrapped Debian, then
    hung (or, with no mirror, ended in a traceback)."""
    code, text, seconds = _agentbench(
        tmp_path, "validate-tasks", "--run", "--suite", "custom-dev", "-k", "fix-mean",
        "--taskpacks", str(TASKPACKS))
    assert code == INFRA_ERROR, text
    _one_line_about_the_daemon(text)
    assert seconds < 60, seconds
    assert not list((tmp_path / "tmp").glob("agentbench-rootfs-*"))


def test_image_build_with_the_daemon_down(tmp_path: Path) -> None:
    """Issue 22 item 2: `agentbench image build` took the same path (debootstrap first)."""
    code, text, seconds = _agentbench(tmp_path, "image", "build")
    assert code != 0, text
    _one_line_about_the_daemon(text)
    assert seconds < 60, seconds


FAKE_DEBOOTSTRAP = """#!/bin/sh
# debootstrap --variant=minbase bookworm ROOT MIRROR: a rootfs far bigger than a pipe's buffer
mkdir -p "$3/usr/lib" && head -c 8388608 /dev/urandom > "$3/usr/lib/blob" && echo "$$" > "$0.pid"
"""


def test_failed_import_does_not_hang_on_tar(tmp_path: Path) -> None:
    """Issue 22 item 2, the hang itself: `docker import` failed at once while the harness still
    held tar's pipe open and waited for tar, which waited to write: for ever. A stand-in
    debootstrap (only the download is faked) makes an 8 MiB rootfs; the real docker CLI's
    import fails because the daemon does not answer. The build fails in one line, promptly,
    and leaves no tar behind."""
    tools = tmp_path / "bin"
    tools.mkdir()
    fake = tools / "debootstrap"
    fake.write_text(FAKE_DEBOOTSTRAP)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = _env(tmp_path, PATH=f"{tools}{os.pathsep}{os.environ['PATH']}")
    if os.geteuid() != 0:
        pytest.skip("bootstrapping a local base needs root")
    code = ("from pytest_agentbench.sandbox.docker.image import ImageBuildError, Log, "
            "bootstrap_local_base\n"
            "try:\n    bootstrap_local_base(Log())\n"
            "except ImageBuildError as exc:\n    print('REFUSED', exc)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        pytest.fail("bootstrap_local_base hung after docker import failed")
    assert "REFUSED docker import failed" in out, out
    assert "Traceback" not in out, out
    assert not list((tmp_path / "tmp").glob("agentbench-rootfs-*"))


def test_run_with_the_daemon_down_is_an_infrastructure_error(tmp_path: Path) -> None:
    """Issue 22 item 4: a run with a dead daemon exited 4, the README's "bad option", as if the
    user had mistyped something. It is infrastructure (10): one line, no run directory."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--agentbench-suite",
         "custom-dev", f"--agentbench-taskpacks={TASKPACKS}", f"--agentbench-out={out}"],
        env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    text = proc.stdout + proc.stderr
    assert proc.returncode == INFRA_ERROR, text
    _one_line_about_the_daemon(text)
    assert "INTERNALERROR" not in text, text
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())
