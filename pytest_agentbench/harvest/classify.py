"""Which part of a change is test, which is fix, and the cheap filters that drop a commit.

A path is a *test* path when a directory on its way is a test directory (`test`, `tests`,
`testing`) or its name is `test_*.py`, `*_test.py` or `conftest.py`; everything in a test
directory counts (test data beside the tests, binary files included). A *docs*, *CI* or
*packaging* path is one a fix never lives in (documentation, CI configuration, version and
packaging metadata). Everything else is *source*: the fix part.

The filters run in a fixed order and the first that matches is the commit's one reason.
Defaults (documented in the README's harvest section): a fix part of at most 10 files and 400
changed lines, a test part of at most 20 files and 2,000 lines.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from dataclasses import dataclass

from pytest_agentbench.harvest.history import Commit, FileChange

TEST_DIRS = frozenset({"test", "tests", "testing"})
TEST_FILES = ("test_*.py", "*_test.py", "conftest.py")
DOCS = ("*.md", "*.rst", "*.txt", "*.adoc", "doc/*", "docs/*", "*/doc/*", "*/docs/*",
        "README*", "CHANGELOG*", "CHANGES*", "HISTORY*", "NEWS*", "AUTHORS*", "LICENSE*",
        "CONTRIBUTING*", "*.png", "*.svg", "*.jpg")
CI = (".github/*", ".gitlab-ci.yml", ".travis.yml", "appveyor.yml", ".circleci/*", "azure-*.yml",
      ".pre-commit-config.yaml", ".readthedocs.y*ml", ".git*", ".coveragerc", "codecov.yml",
      ".flake8", ".bumpversion.cfg", "Makefile", "tox.ini", "noxfile.py", ".editorconfig",
      "mypy.ini", ".ruff.toml", "ruff.toml")
PACKAGING = ("setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in", "requirements*.txt",
             "requirements/*", "*.lock", "Pipfile*", "environment*.yml", "*/_version.py",
             "_version.py", "versioneer.py", "*/version.py", "VERSION")
BOT = re.compile(r"\[bot\]|dependabot|renovate|pre-commit-ci|github-actions|greenkeeper",
                 re.IGNORECASE)
REVERT = re.compile(r"^Revert\b|^revert:", re.IGNORECASE)
RELEASE = re.compile(
    r"^((release|releasing|prepare (for )?release)( v?\d|:|$)|bump( the)? version|version bump|"
    r"bump to v?\d|v?\d+\.\d+(\.\d+)*([ab]|rc)?\d*$|(tag|cut) v?\d|changelog)",
    re.IGNORECASE)  # "Release 1.2", not "Release the lock on error"


@dataclass(frozen=True)
class ChangeLimits:
    fix_files: int = 10
    fix_lines: int = 400
    test_files: int = 20
    test_lines: int = 2_000


@dataclass(frozen=True)
class Split:
    tests: tuple[FileChange, ...]
    source: tuple[FileChange, ...]
    other: tuple[FileChange, ...]  # docs, CI, packaging: in neither patch

    @property
    def test_files(self) -> list[str]:
        """The Python test modules of the test part that still exist after the change."""
        return sorted(c.path for c in self.tests if c.status != "D" and _is_test_module(c.path))


def is_test_path(path: str) -> bool:
    parts = path.split("/")
    if any(part in TEST_DIRS for part in parts[:-1]):
        return True
    return any(fnmatch.fnmatchcase(parts[-1], pattern) for pattern in TEST_FILES)


def _is_test_module(path: str) -> bool:
    name = posixpath.basename(path)
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _matches(path: str, patterns: tuple[str, ...]) -> bool:
    name = posixpath.basename(path)
    return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(name, p) for p in patterns)


def split(changes: list[FileChange]) -> Split:
    tests, source, other = [], [], []
    for change in changes:
        if is_test_path(change.path):
            tests.append(change)
        elif _matches(change.path, DOCS + CI + PACKAGING):
            other.append(change)
        else:
            source.append(change)
    return Split(tuple(tests), tuple(source), tuple(other))


def commit_reason(commit: Commit) -> str | None:
    """A reason to drop `commit` before looking at its change, or None."""
    if not commit.parents:
        return "ROOT_COMMIT"
    if BOT.search(commit.author):
        return "BOT"
    if REVERT.search(commit.subject) or "This reverts commit" in commit.body:
        return "REVERT"
    if RELEASE.search(commit.subject.strip()):
        return "RELEASE"
    return None


def change_reason(parts: Split, limits: ChangeLimits) -> str | None:
    """A reason to drop a change by what it touches, or None: it is a candidate."""
    if not parts.tests and not parts.source:
        return "DOCS_CI_PACKAGING_ONLY" if parts.other else "EMPTY_CHANGE"
    if not parts.tests:
        return "NO_TEST_PART"
    if not parts.source:
        return "NO_SOURCE_PART"
    if not parts.test_files:
        return "NO_PYTHON_TESTS"
    if len(parts.source) > limits.fix_files or _lines(parts.source) > limits.fix_lines:
        return "TOO_LARGE"
    if len(parts.tests) > limits.test_files or _lines(parts.tests) > limits.test_lines:
        return "TOO_LARGE"
    return None


def _lines(changes: tuple[FileChange, ...]) -> int:
    return sum((c.added or 0) + (c.removed or 0) for c in changes)
