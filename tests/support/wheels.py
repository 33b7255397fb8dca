"""The harness as a user installs it: a wheel built from this source tree with uv, and the
environment for commands run outside this repository (nothing of the outer test run leaks in).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.support.sandboxes import in_ci

REPO = Path(__file__).resolve().parents[2]
# Variables that would make a consumer's command see this checkout, its venv or the outer run.
_LEAKS = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "UV_PROJECT_ENVIRONMENT", "CONDA_PREFIX",
          "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")


def uv_or_skip() -> str:
    """The uv executable; skips without one, fails under CI=true (scripts/bootstrap installs it)."""
    uv = shutil.which("uv")
    if uv is None:
        if in_ci():
            pytest.fail("CI=true but uv is not on PATH", pytrace=False)
        pytest.skip("uv is not on PATH (scripts/bootstrap installs it)")
    return uv


def outside_env(**extra: str) -> dict[str, str]:
    """os.environ without what ties a command to this checkout or to the running pytest."""
    env = {k: v for k, v in os.environ.items()
           if k not in _LEAKS and not k.startswith(("PYTEST_", "COV_"))}
    env.update(extra)
    return env


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 300
        ) -> subprocess.CompletedProcess[str]:
    """Run a command; on a non-zero exit, fail with its output."""
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}\n"
                    f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}", pytrace=False)
    return proc


def build_wheel(out: Path) -> Path:
    """Build this source tree's wheel into `out` (`uv build --wheel`) and return its path."""
    uv = uv_or_skip()
    run([uv, "build", "--wheel", "--quiet", "--out-dir", str(out)], cwd=REPO,
        env=outside_env())
    wheels = sorted(out.glob("pytest_agentbench-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()
