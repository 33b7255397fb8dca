"""The harness version recorded in every attempt: the package version plus the commit of the
harness's own source, never the commit of the repository that uses it.

The commit comes from the first of these that answers:

1. a git checkout of pytest-agentbench itself (an editable install, or the source on PYTHONPATH):
   the package directory sits directly under the checkout's top level, whose pyproject.toml names
   `pytest-agentbench`; `.dirty` when the package's files differ from HEAD;
2. a built wheel: `pytest_agentbench/_build_info.py`, written at build time by the hook in
   hatch_build.py from the checkout the wheel was built from (ignored by git);
3. nothing: the bare package version (an install built without git).

An installed copy (site-packages, or a copy of the package inside another repository) never runs
git, so a consumer's own commits never change the version, and two runs of the same harness pair.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import subprocess
import tomllib
from pathlib import Path

from pytest_agentbench import __version__

PROJECT_NAME = "pytest-agentbench"
PACKAGE_DIR = Path(__file__).resolve().parent
_SHA = re.compile(r"[0-9a-f]{7,40}")
# Variables that would point git at another repository than the directory asked about.
_GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


def format_version(sha: str | None, dirty: bool = False) -> str:
    """`0.1.0`, or `0.1.0+g<12 hex>` with `.dirty` when the source differed from that commit."""
    if not sha:
        return __version__
    return f"{__version__}+g{sha[:12]}" + (".dirty" if dirty else "")


@functools.cache
def harness_version() -> str:
    root = source_checkout(PACKAGE_DIR)
    if root is not None:
        sha, dirty = git_commit(root)
        if sha:
            return format_version(sha, dirty)
    sha, dirty = build_info()
    return format_version(sha, dirty)


def source_checkout(package_dir: Path) -> Path | None:
    """The top level of the pytest-agentbench git checkout that holds `package_dir`, or None.

    None for an installed copy: its parent has no pyproject.toml naming this project, or is not
    the top level of a git work tree (a copy vendored inside a consumer's repository)."""
    root = package_dir.parent
    if not (root / ".git").exists() or not _names_this_project(root / "pyproject.toml"):
        return None
    toplevel = _git(root, "rev-parse", "--show-toplevel")
    if not toplevel or Path(toplevel).resolve() != root.resolve():
        return None
    return root


def git_commit(root: Path) -> tuple[str, bool]:
    """HEAD of the checkout at `root` and whether the package's files differ from it."""
    sha = _git(root, "rev-parse", "HEAD")
    if not sha or not _SHA.fullmatch(sha):
        return "", False
    dirty = bool(_git(root, "status", "--porcelain", "--", PACKAGE_DIR.name))
    return sha, dirty


def build_info() -> tuple[str, bool]:
    """The commit a built wheel was made from (hatch_build.py writes the module), if any."""
    try:
        info = importlib.import_module("pytest_agentbench._build_info")
    except ImportError:
        return "", False
    sha = getattr(info, "COMMIT", "")
    if not isinstance(sha, str) or not _SHA.fullmatch(sha):
        return "", False
    return sha, bool(getattr(info, "DIRTY", False))


def _names_this_project(pyproject: Path) -> bool:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    project = data.get("project")
    return isinstance(project, dict) and project.get("name") == PROJECT_NAME


def _git(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_REDIRECTS}
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=5, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""
