"""Hatch build hook: a wheel (or sdist) carries the commit it was built from.

Writes `pytest_agentbench/_build_info.py` (COMMIT, DIRTY) into the distribution, never into the
source tree, so that an installed harness reports `0.1.0+g<commit>` without running git
(pytest_agentbench/version.py reads it). The commit is that of this project's own checkout: the
build root must be the top level of a git work tree whose pyproject.toml names pytest-agentbench.
Built from an unpacked sdist (no git), the sdist's copy of the module is carried over as it is.
Editable installs get nothing: version.py asks the live checkout instead.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

TARGET = "pytest_agentbench/_build_info.py"
_GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")


def _git(root: Path, *args: str) -> str | None:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_REDIRECTS}
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=10, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def source_commit(root: Path) -> tuple[str, bool] | None:
    """(HEAD, package files differ from it) of the checkout at `root`, or None if `root` is not
    the top level of a git work tree."""
    if not (root / ".git").exists():
        return None
    toplevel = _git(root, "rev-parse", "--show-toplevel")
    if not toplevel or Path(toplevel).resolve() != root.resolve():
        return None
    sha = _git(root, "rev-parse", "HEAD")
    if not sha:
        return None
    dirty = bool(_git(root, "status", "--porcelain", "--", "pytest_agentbench"))
    return sha, dirty


class BuildInfoHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        root = Path(self.root)
        found = source_commit(root)
        if found is None:
            shipped = root / TARGET
            if shipped.is_file():  # an unpacked sdist: keep the commit it was made from
                build_data["force_include"][str(shipped)] = TARGET
            return
        sha, dirty = found
        self._tmp = tempfile.TemporaryDirectory(prefix="agentbench-build-info-")
        path = Path(self._tmp.name) / "_build_info.py"
        path.write_text(
            '"""Written by hatch_build.py when this distribution was built: the commit of\n'
            'pytest-agentbench it was built from (pytest_agentbench/version.py reads it)."""\n\n'
            f"COMMIT = {sha!r}\nDIRTY = {dirty!r}\n",
            encoding="utf-8",
        )
        build_data["force_include"][str(path)] = TARGET

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            tmp.cleanup()
