"""Scanners over a run's attempts (placeholder, filled below)."""

from __future__ import annotations

from pathlib import PurePosixPath

TEST_DIRS = frozenset({"tests", "test", "testing"})


def is_test_path(path: str) -> bool:
    """A test file by the usual layout: under tests/ (or test/, testing/), `test_*.py`,
    `*_test.py`, or a conftest.py."""
    pure = PurePosixPath(path)
    name = pure.name
    return (bool(TEST_DIRS & set(pure.parts[:-1])) or name == "conftest.py"
            or (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py"))
