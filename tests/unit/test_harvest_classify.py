"""The harvest's cheap filters (harvest/classify.py, candidates.modules_beside): which part of a
change is test, fix or neither, and the one reason each kind of commit is dropped for."""

from __future__ import annotations

import pytest

from pytest_agentbench.harvest.candidates import modules_beside
from pytest_agentbench.harvest.classify import (
    ChangeLimits,
    change_reason,
    commit_reason,
    is_test_path,
    split,
)
from pytest_agentbench.harvest.history import Commit, FileChange


def change(path: str, lines: int | None = 2, status: str = "M") -> FileChange:
    return FileChange(path, status, lines, 0 if lines is not None else None)


def commit(subject: str, body: str = "", author: str = "Ann <ann@example.org>",
           parents: tuple[str, ...] = ("p" * 40,)) -> Commit:
    return Commit("c" * 40, parents, author, "2020-01-01T00:00:00+00:00", subject, body)


@pytest.mark.parametrize("path", [
    "tests/test_core.py", "test/helpers.py", "pkg/tests/data/input.bin", "testing/util.py",
    "test_core.py", "pkg/core_test.py", "conftest.py", "pkg/conftest.py",
    "tests/data/notes.txt", "tests/README.md",  # anything in a test directory is test data
])
def test_test_paths(path: str) -> None:
    assert is_test_path(path)
    assert split([change(path)]).tests == (change(path),)


@pytest.mark.parametrize("path", ["pkg/core.py", "contest.py", "pkg/testlib.py", "src/pkg/x.c",
                                  "attest/core.py", "pkg/latest/x.py"])
def test_source_paths(path: str) -> None:
    assert not is_test_path(path)
    assert split([change(path)]).source == (change(path),)


@pytest.mark.parametrize("path", [
    "README.md", "docs/index.rst", "doc/api.txt", "CHANGELOG", "LICENSE.txt", "docs/conf.py",
    ".github/workflows/ci.yml", ".travis.yml", "tox.ini", "Makefile", ".pre-commit-config.yaml",
    "setup.py", "setup.cfg", "pyproject.toml", "requirements-dev.txt", "requirements/test.in",
    "pkg/_version.py", "MANIFEST.in", "uv.lock",
])
def test_docs_ci_and_packaging_paths_are_in_neither_patch(path: str) -> None:
    parts = split([change(path)])
    assert parts.other == (change(path),) and not parts.tests and not parts.source


def test_test_files_are_the_python_modules_left_after_the_change() -> None:
    parts = split([change("tests/test_old.py", status="D"), change("tests/test_new.py", 3, "A"),
                   change("tests/conftest.py"), change("tests/data/x.bin", None, "A")])
    assert parts.test_files == ["tests/test_new.py"]


@pytest.mark.parametrize(("made", "reason"), [
    (commit("Initial", parents=()), "ROOT_COMMIT"),
    (commit("Bump attrs", author="dependabot[bot] <1+dependabot[bot]@users.noreply.github.com>"),
     "BOT"),
    (commit("[pre-commit.ci] autoupdate", author="pre-commit-ci[bot] <x@y>"), "BOT"),
    (commit('Revert "Fix add"'), "REVERT"),
    (commit("Undo the add fix", "This reverts commit 1a2b3c4d5e6f."), "REVERT"),
    (commit("Release 1.2.0"), "RELEASE"),
    (commit("Bump version: 0.2.5 → 0.2.6"), "RELEASE"),
    (commit("bump version to 0.7.4"), "RELEASE"),
    (commit("v1.2.3"), "RELEASE"),
    (commit("2.0rc1"), "RELEASE"),
    (commit("Changelog for v1.2.1"), "RELEASE"),
    (commit("Fix add for negative numbers"), None),
    (commit("Release the lock when a write fails"), None),
    (commit("Releasing a handle twice no longer crashes"), None),
    (commit("Revertible transactions: fix rollback"), None),
])
def test_commit_reasons(made: Commit, reason: str | None) -> None:
    assert commit_reason(made) == reason


SRC, TEST = change("pkg/core.py"), change("tests/test_core.py")


@pytest.mark.parametrize(("changes", "reason"), [
    ([], "EMPTY_CHANGE"),
    ([change("README.md"), change(".github/workflows/ci.yml")], "DOCS_CI_PACKAGING_ONLY"),
    ([SRC, change("README.md")], "NO_TEST_PART"),
    ([TEST, change("setup.py")], "NO_SOURCE_PART"),
    ([SRC, change("tests/data/case.toml")], "NO_PYTHON_TESTS"),
    ([SRC, TEST, change("CHANGES.rst")], None),
    ([SRC, TEST, change("tests/data/x.bin", None, "A")], None),  # binary: no line count
])
def test_change_reasons(changes: list[FileChange], reason: str | None) -> None:
    assert change_reason(split(changes), ChangeLimits()) == reason


@pytest.mark.parametrize(("source", "tests", "reason"), [
    ([change(f"pkg/m{i}.py") for i in range(10)], [TEST], None),
    ([change(f"pkg/m{i}.py") for i in range(11)], [TEST], "TOO_LARGE"),
    ([change("pkg/core.py", 400)], [TEST], None),
    ([change("pkg/core.py", 401)], [TEST], "TOO_LARGE"),
    ([SRC], [change(f"tests/test_{i}.py") for i in range(20)], None),
    ([SRC], [change(f"tests/test_{i}.py") for i in range(21)], "TOO_LARGE"),
    ([SRC], [change("tests/test_core.py", 2000)], None),
    ([SRC], [change("tests/test_core.py", 2001)], "TOO_LARGE"),
])
def test_default_limits_are_inclusive(source: list[FileChange], tests: list[FileChange],
                                      reason: str | None) -> None:
    assert change_reason(split(source + tests), ChangeLimits()) == reason


def test_limits_are_options() -> None:
    parts = split([change("pkg/core.py", 50), TEST])
    assert change_reason(parts, ChangeLimits(fix_lines=49)) == "TOO_LARGE"
    assert change_reason(parts, ChangeLimits(fix_files=0)) == "TOO_LARGE"
    assert change_reason(parts, ChangeLimits(fix_lines=50)) is None


def test_data_only_tests_run_the_modules_of_their_test_directory() -> None:
    parts = split([SRC, change("tests/data/case.toml", 3, "A")])
    files = ["pkg/core.py", "tests/test_a.py", "tests/b_test.py", "tests/helpers.py",
             "tests/data/case.toml", "other/tests_x/test_c.py", "test_top.py"]
    assert modules_beside(parts, files) == ["tests/b_test.py", "tests/test_a.py"]
