"""The layer contract (.importlinter) holds on the package, and really fails on an upward import.

CI runs `lint-imports` on the tree; these tests prove the contract is not vacuous: a copy of the
package with one deliberately added upward import, or one cycle, is refused.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "lint-imports is not installed (dev dependency import-linter)"
    return subprocess.run(
        [exe, "--no-cache", "--no-logo", "--config", str(cwd / ".importlinter")],
        cwd=cwd, env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "pytest_agentbench", tmp_path / "pytest_agentbench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


def add_import(module: Path, statement: str) -> None:
    text = module.read_text()
    marker = "from __future__ import annotations\n"
    assert marker in text, module
    module.write_text(text.replace(marker, marker + statement + "\n", 1))


def test_the_package_keeps_its_layers(package_copy: Path) -> None:
    done = lint(package_copy)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_upward_import_breaks_the_contract(package_copy: Path) -> None:
    add_import(package_copy / "pytest_agentbench/paths/globs.py",
               "import pytest_agentbench.core.pipeline  # noqa")
    done = lint(package_copy)
    assert done.returncode == 1
    assert "pytest_agentbench.paths is not allowed to import pytest_agentbench.core" in done.stdout


def test_the_pipeline_may_not_import_pytest(package_copy: Path) -> None:
    add_import(package_copy / "pytest_agentbench/core/scoring.py", "import pytest  # noqa")
    done = lint(package_copy)
    assert done.returncode == 1
    assert "pytest_agentbench.core.scoring -> pytest" in done.stdout


def test_a_cycle_between_siblings_breaks_the_contract(package_copy: Path) -> None:
    add_import(package_copy / "pytest_agentbench/reporting/stats.py",
               "import pytest_agentbench.reporting.gate  # noqa")
    done = lint(package_copy)
    assert done.returncode == 1
    assert "No cycles are allowed in pytest_agentbench.reporting" in done.stdout
