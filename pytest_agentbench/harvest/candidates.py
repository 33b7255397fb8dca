"""From a first-parent commit to a candidate (or the one reason it is dropped): the cheap,
host-only stages of a harvest, git on the harness's own mirror and nothing run."""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_agentbench.harvest import history
from pytest_agentbench.harvest.classify import (
    ChangeLimits,
    Split,
    change_reason,
    commit_reason,
    split,
)
from pytest_agentbench.harvest.history import Commit
from pytest_agentbench.harvest.setup_infer import SetupPlan, infer_setup


@dataclass(frozen=True)
class CommitCandidate:
    commit: Commit
    parent: str
    parts: Split
    modules: tuple[str, ...]  # the test modules to run
    tests_patch: bytes
    fix_patch: bytes
    plan: SetupPlan

    @property
    def fix_hash(self) -> str:
        return hashlib.sha256(self.fix_patch).hexdigest()


@dataclass(frozen=True)
class Dropped:
    commit: Commit
    reason: str
    detail: str = ""


def examine(mirror: Path, commit: Commit, limits: ChangeLimits, setup: tuple[str, ...],
            seen_fixes: set[str]) -> CommitCandidate | Dropped:
    """The cheap filters in order; the first that matches is the commit's reason."""
    reason = commit_reason(commit)
    if reason is not None:
        return Dropped(commit, reason)
    parent = commit.parents[0]
    try:
        parts = split(history.changes(mirror, parent, commit.sha))
    except UnicodeDecodeError:
        return Dropped(commit, "UNREADABLE_CHANGE", "a path that is not UTF-8")
    reason = change_reason(parts, limits)
    modules = tuple(parts.test_files)
    if reason == "NO_PYTHON_TESTS":
        modules = tuple(modules_beside(parts, history.files_at(mirror, commit.sha)))
        reason = None if modules else reason
    if reason is not None:
        return Dropped(commit, reason)
    fix = history.patch(mirror, parent, commit.sha, [c.path for c in parts.source])
    digest = hashlib.sha256(fix).hexdigest()
    if digest in seen_fixes:
        return Dropped(commit, "DUPLICATE_FIX")
    seen_fixes.add(digest)
    return build(mirror, commit, parent, parts, modules, setup, fix)


def build(mirror: Path, commit: Commit, parent: str, parts: Split, modules: tuple[str, ...],
          setup: tuple[str, ...], fix: bytes | None = None) -> CommitCandidate:
    """The candidate of the change `parent` -> `commit`: its two patches and its setup plan
    (`agentbench task new` enters here for one change, past the harvest's filters)."""
    if fix is None:
        fix = history.patch(mirror, parent, commit.sha, [c.path for c in parts.source])
    tests = history.patch(mirror, parent, commit.sha, [c.path for c in parts.tests])
    paths = history.files_at(mirror, parent)
    plan = infer_setup(lambda p: history.read_at(mirror, parent, p), paths, setup)
    return CommitCandidate(commit, parent, parts, modules, tests, fix, plan)


def modules_beside(parts: Split, files: list[str]) -> list[str]:
    """For a test part of data files only: the Python test modules of the same test
    directory (`tests/data/x.toml` -> `tests/test_*.py`)."""
    roots = set()
    for change in parts.tests:
        segments = change.path.split("/")
        for i, segment in enumerate(segments[:-1]):
            if segment in ("test", "tests", "testing"):
                roots.add("/".join(segments[: i + 1]))
                break
    test_module = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")
    return sorted(f for f in files if posixpath.dirname(f) in roots and test_module.search(f))


def task_id(prefix: str, commit: Commit) -> str:
    return f"{prefix}-{commit.sha[:10]}"
