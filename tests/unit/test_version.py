"""Issue 11 item 2: the harness version is the package version plus the commit of
pytest-agentbench's own source, never the commit of the repository that installs it (that made
`gate` refuse to pair two runs of a consumer after one commit)."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_agentbench.version as version
from pytest_agentbench import __version__
from tests.support.wheels import REPO, outside_env

PACKAGE = Path(version.__file__).resolve().parent


def _git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          capture_output=True, text=True, check=True, env=outside_env())
    return proc.stdout.strip()


def _repo(path: Path, name: str) -> str:
    """A git repository at `path` whose pyproject names `name`, one commit; returns its HEAD."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "1"\n')
    _git(path, "init", "-q")
    _git(path, "add", "-A")
    _git(path, "commit", "-qm", "init")
    return _git(path, "rev-parse", "HEAD")


def _copy_package(dest: Path) -> Path:
    shutil.copytree(PACKAGE, dest / "pytest_agentbench",
                    ignore=shutil.ignore_patterns("__pycache__", "_build_info.py"))
    return dest / "pytest_agentbench"


def _version_of(package_parent: Path, cwd: Path) -> str:
    """harness_version() of the package under `package_parent`, in a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-c", "import pytest_agentbench.version as v; "
         "print(v.__file__); print(v.harness_version())"],
        cwd=cwd, capture_output=True, text=True, check=True,
        env=outside_env(PYTHONPATH=str(package_parent)),
    )
    where, found = proc.stdout.split()
    assert Path(where).resolve().is_relative_to(package_parent.resolve())
    return found


@pytest.mark.parametrize("install", [".venv/lib/python3/site-packages", "."])
def test_an_installed_copy_in_a_consumer_repo_never_takes_its_commit(
    tmp_path: Path, install: str
) -> None:
    """site-packages inside the consumer's tree, and a copy vendored at its top level."""
    consumer = tmp_path / "consumer"
    head = _repo(consumer, "consumer")
    site = consumer / install
    _copy_package(site)
    _git(consumer, "add", "-A")  # even committed, the consumer's commits are not the harness's
    _git(consumer, "commit", "-qm", "vendor")
    head = _git(consumer, "rev-parse", "HEAD")
    found = _version_of(site, consumer)
    assert found == __version__
    assert head[:7] not in found


def test_a_wheel_reports_the_commit_it_was_built_from(tmp_path: Path) -> None:
    consumer = tmp_path / "consumer"
    _repo(consumer, "consumer")
    site = consumer / "site-packages"
    package = _copy_package(site)
    (package / "_build_info.py").write_text(f"COMMIT = {'ab' * 20!r}\nDIRTY = False\n")
    assert _version_of(site, consumer) == f"{__version__}+g{'ab' * 6}"
    (package / "_build_info.py").write_text("COMMIT = 'not a sha'\n")
    assert _version_of(site, consumer) == __version__


def test_a_checkout_of_pytest_agentbench_reports_its_head(tmp_path: Path) -> None:
    source = tmp_path / "src"
    _copy_package(source)
    head = _repo(source, version.PROJECT_NAME)
    assert _version_of(source, tmp_path) == f"{__version__}+g{head[:12]}"
    (source / "pytest_agentbench" / "extra.py").write_text("")
    assert _version_of(source, tmp_path) == f"{__version__}+g{head[:12]}.dirty"
    # the same layout under another project's name is that project's checkout, not ours
    (source / "pyproject.toml").write_text('[project]\nname = "other"\n')
    assert _version_of(source, tmp_path) == __version__


def test_this_checkout_reports_its_own_head() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    head = _git(REPO, "rev-parse", "HEAD")
    assert version.source_checkout(PACKAGE) == REPO
    assert _version_of(REPO, Path("/")).startswith(f"{__version__}+g{head[:12]}")


def test_the_installed_metadata_is_the_package_version() -> None:
    assert importlib.metadata.version("pytest-agentbench") == __version__


def test_agentbench_version_prints_the_harness_version(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_agentbench.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"agentbench {version.harness_version()}\n"
