"""The project root found from any directory, as pytest finds its rootdir, and its ini keys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentbench.paths.project import find_project


def _pytest_rootdir(cwd: Path) -> Path:
    """pytest's own answer for a run without path arguments from `cwd` (a fresh process)."""
    code = ("import pathlib, _pytest.config.findpaths as f; print(f.determine_setup("
            "inifile=None, override_ini=None, args=[], rootdir_cmd_arg=None, "
            "invocation_dir=pathlib.Path.cwd())[0])")
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          check=True)
    return Path(done.stdout.strip()).resolve()


CASES = {
    "pytest.ini": "[pytest]\nagentbench_out = out/runs\n",
    "pyproject.toml": "[tool.pytest.ini_options]\nagentbench_out = 'out/runs'\n",
    "tox.ini": "[tox]\n[pytest]\nagentbench_out = out/runs\n",
    "setup.cfg": "[tool:pytest]\nagentbench_out = out/runs\n",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_root_and_ini_from_a_subdirectory(tmp_path: Path, name: str) -> None:
    project = tmp_path / "proj"
    sub = project / "tests" / "deep"
    sub.mkdir(parents=True)
    (project / name).write_text(CASES[name])
    found = find_project(sub)
    assert found.root == project.resolve() and found.inifile == project.resolve() / name
    assert found.out == project.resolve() / "out" / "runs"
    assert found.taskpacks == project.resolve() / "taskpacks"
    assert found.root == _pytest_rootdir(sub)


def test_sections_without_pytest_config_are_passed_over(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "inner"
    inner.mkdir(parents=True)
    (outer / "pytest.ini").write_text("[pytest]\nagentbench_taskpacks = packs\n")
    (inner / "tox.ini").write_text("[tox]\nenvlist = py\n")  # no [pytest]: not a config
    (inner / "setup.cfg").write_text("[metadata]\nname = x\n")  # no [tool:pytest]
    found = find_project(inner)
    assert found.root == outer.resolve() and found.taskpacks == outer.resolve() / "packs"
    assert found.out == outer.resolve() / "reports" / "runs"
    assert found.root == _pytest_rootdir(inner)


def test_pyproject_without_pytest_table_is_the_fallback(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "pkg"
    inner.mkdir(parents=True)
    (inner / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    found = find_project(inner)
    assert found.root == inner.resolve() and found.ini == {}
    assert found.root == _pytest_rootdir(inner)


def test_empty_pytest_ini_still_wins_and_cwd_is_the_last_resort(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "pytest.ini").write_text("")
    assert find_project(tmp_path / "a" / "b").root == (tmp_path / "a").resolve()
    (tmp_path / "x" / "y").mkdir(parents=True)
    (tmp_path / "x" / "setup.py").write_text("")
    assert find_project(tmp_path / "x" / "y").root == (tmp_path / "x").resolve()
    assert _pytest_rootdir(tmp_path / "x" / "y") == (tmp_path / "x").resolve()


def test_toml_native_table_and_absolute_values(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.pytest]\nagentbench_out = '{tmp_path / 'abs'}'\nminversion = '8'\n")
    found = find_project(tmp_path)
    assert found.out == (tmp_path / "abs").resolve()


def test_broken_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text("[tool.pytest.ini_options\n")  # bad TOML
    (tmp_path / "pytest.ini").write_text("[pytest]\nagentbench_out = o\n")
    found = find_project(tmp_path / "sub")
    assert found.out == (tmp_path / "o").resolve()
