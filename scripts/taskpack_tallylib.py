"""Source of the `custom-setups` suite: `tallylib`, an installable package, and per task the change
that breaks it (issue 10 item 1: setups that make their own venv, `pip install -e .`, plain pip).

Unlike minilib, tallylib is a real distribution: a pyproject.toml with the setuptools backend and a
`src/` layout, so `import tallylib` works only once something installed it (an editable install
into a venv or /env) or the command puts `src` on PYTHONPATH. Used by make_taskpacks.py; a value
of None in a task's `bug` deletes that file. Versions are pinned so the setups are repeatable.
"""

from __future__ import annotations

SUITE = "custom-setups"
SETUPTOOLS = "setuptools==75.8.0"  # the build backend, fetched by pip's build isolation
PYTEST = "pytest==8.3.4"
SCI = ["numpy==1.26.4", "pandas==2.2.3", "scipy==1.13.1"]

PYPROJECT = f'''[build-system]
requires = ["{SETUPTOOLS}"]
build-backend = "setuptools.build_meta"

[project]
name = "tallylib"
version = "0.1.0"
description = "A tiny counting library used by the agentbench taskpacks."
requires-python = ">=3.9"

[project.optional-dependencies]
test = ["{PYTEST}"]
sci = [{", ".join(f'"{p}"' for p in SCI)}]

[tool.setuptools.packages.find]
where = ["src"]
'''

INIT = '''"""tallylib: a tiny counting library the agentbench taskpacks break and fix."""

from tallylib.counting import most_common, tally
from tallylib.ranges import merge_ranges

__all__ = ["merge_ranges", "most_common", "tally"]
'''

COUNTING = '''def tally(items):
    """How many times each item occurs, in first-seen order."""
    counts = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


def most_common(items, n):
    """The n most common items, most common first; ties keep first-seen order."""
    counts = tally(items)
    return sorted(counts, key=lambda item: -counts[item])[:n]
'''

RANGES = '''def merge_ranges(ranges):
    """Merge overlapping or adjacent closed integer ranges [(low, high), ...]."""
    merged = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged
'''

RUNNING = '''from sortedcontainers import SortedList


class RunningMedian:
    """The median of the values added so far."""

    def __init__(self):
        self._values = SortedList()

    def add(self, value):
        self._values.add(value)

    def median(self):
        n = len(self._values)
        if not n:
            raise ValueError("median of no values")
        mid = n // 2
        if n % 2:
            return self._values[mid]
        return (self._values[mid - 1] + self._values[mid]) / 2
'''

SCIPY = '''import numpy as np
import pandas as pd
from scipy import stats


def zscores(values):
    """Standard scores of values, against the population standard deviation."""
    return stats.zscore(np.asarray(values, dtype=float), ddof=0).tolist()


def rolling_mean(values, window):
    """The mean of every full window of `window` consecutive values."""
    return pd.Series(values, dtype=float).rolling(window).mean().dropna().tolist()
'''

TESTS = {
    "tests/test_counting.py": '''from tallylib import most_common, tally


def test_tally():
    assert tally("abca") == {"a": 2, "b": 1, "c": 1}


def test_most_common():
    assert most_common("abcbcc", 2) == ["c", "b"]
    assert most_common("xyz", 2) == ["x", "y"]
''',
    "tests/test_ranges.py": '''from tallylib import merge_ranges


def test_merge_overlapping():
    assert merge_ranges([(6, 8), (1, 3), (2, 4)]) == [(1, 4), (6, 8)]


def test_merge_adjacent():
    assert merge_ranges([(1, 2), (3, 4), (6, 7)]) == [(1, 4), (6, 7)]
''',
    "tests/test_installed.py": '''"""The setup installed tallylib, editable, from here."""

from importlib.metadata import version
from pathlib import Path

import tallylib


def test_installed_editable_from_the_checkout():
    assert version("tallylib") == "0.1.0"
    assert Path(tallylib.__file__).resolve().parent == Path("src/tallylib").resolve()
''',
    "tests/test_running_median.py": '''from tallylib.running import RunningMedian


def test_running_median():
    rm = RunningMedian()
    for value, expected in [(5, 5), (1, 3), (9, 5), (2, 3.5)]:
        rm.add(value)
        assert rm.median() == expected
''',
    "tests/test_sci.py": '''import pytest

from tallylib.sci import rolling_mean, zscores


def test_zscores():
    assert zscores([2, 4, 4, 4, 5, 5, 7, 9]) == pytest.approx(
        [-1.5, -0.5, -0.5, -0.5, 0.0, 0.0, 1.0, 2.0])


def test_rolling_mean():
    assert rolling_mean([1, 2, 3, 4, 5], 3) == [2.0, 3.0, 4.0]
''',
}

BASE_FILES: dict[str, str | None] = {
    "README.md": "# tallylib\n\nA tiny installable library used by the agentbench taskpacks.\n",
    ".gitignore": "__pycache__/\n.pytest_cache/\n*.egg-info/\nbuild/\n.venv/\n",
    "pyproject.toml": PYPROJECT,
    "src/tallylib/__init__.py": INIT,
    "src/tallylib/counting.py": COUNTING,
    "src/tallylib/ranges.py": RANGES,
    "src/tallylib/running.py": RUNNING,
    "src/tallylib/sci.py": SCIPY,
    **TESTS,
}

TASKS: dict[str, dict] = {
    "venv-editable": {
        "suite": SUITE, "title": "merge_ranges leaves adjacent ranges apart (setup: own venv)",
        "bug": {"src/tallylib/ranges.py": RANGES.replace("merged[-1][1] + 1", "merged[-1][1]")},
    },
    "pip-editable": {
        "suite": SUITE, "title": "most_common puts the least common first (setup: pip -e .)",
        "bug": {"src/tallylib/counting.py": COUNTING.replace("-counts[item]", "counts[item]")},
    },
    "plain-pip": {
        "suite": SUITE, "title": "RunningMedian of an even count (setup: pip install a package)",
        "bug": {"src/tallylib/running.py": RUNNING.replace(
            "return (self._values[mid - 1] + self._values[mid]) / 2",
            "return self._values[mid]")},
    },
    "slow-setup-20s": {
        "suite": SUITE, "title": "rolling_mean windows one short (setup: numpy, pandas, scipy)",
        "bug": {"src/tallylib/sci.py": SCIPY.replace(".rolling(window)", ".rolling(window - 1)")},
    },
}
