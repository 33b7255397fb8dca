"""A tiny Python project with two bug/fix pairs in its history, made with real git: the
newcomer's repository of issue 22 (tests/e2e/test_newcomer_walkthrough.py, test_task_new_bundle.py).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.harvest_history import History

LIB = '''def mean(xs):
    return sum(xs) / len(xs)


def clamp(x, lo, hi):
    return max(lo, min(x, hi))
'''
TESTS = '''from tinylib import clamp, mean


def test_mean():
    assert mean([1, 2, 3]) == 2


def test_clamp_high():
    assert clamp(5, 0, 3) == 3
'''
CLAMP_TEST = '''

def test_clamp_low():
    assert clamp(-4, 0, 3) == 0
'''


def make_project(path: Path) -> History:
    """Five commits: the package, a mean bug, its fix (the tests already catch it), a clamp bug
    the tests miss, its fix with a new test."""
    history = History(path)
    history.commit("tinylib with tests", {
        "tinylib/__init__.py": LIB, "tests/test_tiny.py": TESTS,
        "pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'})
    history.commit("mean: one pass", {"tinylib/__init__.py": LIB.replace(
        "sum(xs) / len(xs)", "sum(xs) / (len(xs) + 1)")})
    history.commit("The mean of [1, 2, 3] comes out as 1.5", {"tinylib/__init__.py": LIB})
    history.commit("clamp: shorter", {"tinylib/__init__.py": LIB.replace(
        "max(lo, min(x, hi))", "min(x, hi)")})
    history.commit("clamp lets values below the range through", {
        "tinylib/__init__.py": LIB, "tests/test_tiny.py": TESTS + CLAMP_TEST})
    return history
