"""Test infrastructure the agent may not change unless the task opts out (`protect_test_infra`).

An agent that edits the judge instead of the code under test must not pass. Two kinds of
protection, because an agent may legitimately add files (a reproduction script named
`test_repro.py`) but not the ones that steer the test runner:

- `ALWAYS` globs, new files included: conftest files and pytest config files at any depth
  (pytest picks the one nearest the test paths), start-up hooks, and a module that would shadow
  pytest itself on `python -m pytest`.
- Files that existed before the agent: the tests the commands run. When a command runs pytest,
  every file matching pytest's default `python_files` (`unittest`'s `test*.py` for unittest);
  the files a command names; every file under a named directory called `test`, `tests` or
  `testing` (test data included); the script an interpreter is given (`python checks.py`).
  A named directory that is not a test directory (`pytest src/`, `--pyargs pkg`) protects only
  the test files inside it, never the code under test beside them.

The pytest sections of `pyproject.toml` and `setup.cfg` (at any depth) are compared by content,
since the rest of those files may be legitimate to edit.
"""

from __future__ import annotations

import configparser
import fnmatch
import posixpath
import re
import shlex
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pytest_agentbench.core.evidence import runs_pytest
from pytest_agentbench.paths.files import Files, PathEscape
from pytest_agentbench.paths.globs import matches_any

ALWAYS = (
    "**/conftest.py",
    "**/pytest.ini",
    "**/.pytest.ini",
    "**/pytest.toml",
    "**/.pytest.toml",
    "**/tox.ini",
    "**/sitecustomize.py",
    "**/usercustomize.py",
    "pytest.py",
    "py.py",
    "pytest/**",
    "_pytest/**",
)
PYTEST_TEST_FILES = ("**/test_*.py", "**/*_test.py")
UNITTEST_TEST_FILES = ("**/test*.py",)
TEST_DIR_NAMES = frozenset({"test", "tests", "testing"})
CONFIG_MAX_BYTES = 4 * 1024 * 1024
LIST_LIMIT = 200_000
INTERPRETERS = frozenset({"python", "python3", "bash", "sh", "node", "perl", "ruby"})


@dataclass(frozen=True)
class Protection:
    globs: tuple[str, ...]  # read-only whether the file exists or not
    paths: frozenset[str]  # pre-agent files that are read-only


def protect(commands: Iterable[str], files: Files) -> Protection:
    """What is read-only for the agent, from the task's commands and the pre-agent workspace."""
    commands = list(commands)
    existing = [p for p in files.list(".", None, limit=LIST_LIMIT) if not p.startswith(".git/")]
    patterns: list[str] = []
    if any(runs_pytest(c) for c in commands):
        patterns += PYTEST_TEST_FILES
    if any("unittest" in c for c in commands):
        patterns += UNITTEST_TEST_FILES
    named = [p for c in commands for p in _named_paths(c)]
    test_dirs = [p for p in named if TEST_DIR_NAMES & set(p.split("/"))]
    is_test_file = _basename_matcher(patterns)
    paths = {
        path
        for path in existing
        if (patterns and is_test_file(path))
        or path in named
        or any(path.startswith(d + "/") for d in test_dirs)
    }
    return Protection(ALWAYS, frozenset(paths))


def _basename_matcher(patterns: list[str]) -> Callable[[str], bool]:
    """`matches_any(path, patterns)`, one compiled regex on the file name when every pattern
    is `**/<name glob>` (the harness's own test-file patterns): the generic matcher walks a
    large workspace (a 10k-file .venv) at about 0.1 ms a path."""
    if not all(p.startswith("**/") and "/" not in p[3:] for p in patterns):
        return lambda path: matches_any(path, patterns)
    names = re.compile("|".join(f"(?:{fnmatch.translate(p[3:])})" for p in patterns) or "(?!)")
    return lambda path: names.match(path.rsplit("/", 1)[-1]) is not None


def _named_paths(command: str) -> list[str]:
    """Paths a command runs as tests: pytest's positional arguments (`tests`,
    `tests/test_x.py::t`), unittest's dotted modules, and the script an interpreter or the shell
    runs. Files a command merely reads (`grep -q ok value.txt`) are not named."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        words = command.split()
    segments: list[list[str]] = [[]]
    for word in words:
        if word and set(word) <= set(";&|"):
            segments.append([])
        else:
            segments[-1].append(word)
    paths: list[str] = []
    for segment in segments:
        paths += [_clean(w) for w in _segment_words(segment) if _is_path_word(w)]
    return paths


def _segment_words(words: list[str]) -> list[str]:
    for i, word in enumerate(words):
        if runs_pytest(word):
            return words[i + 1 :]
        if word == "unittest":
            return [w.replace(".", "/") + ".py" for w in words[i + 1 :] if not w.startswith("-")]
    if words and posixpath.basename(words[0]) in INTERPRETERS:
        return [w for w in words[1:2] if not w.startswith("-")]
    return words[:1]


def _is_path_word(word: str) -> bool:
    return not (word.startswith(("-", "/", "~", "$")) or "=" in word)


def _clean(word: str) -> str:
    path = posixpath.normpath(word.split("::", 1)[0])
    return "" if path in (".", "") or path.startswith("..") else path


def pytest_config_change(before: Files, after: Files, changed: Iterable[str]) -> str | None:
    """A violation message if a changed pyproject.toml or setup.cfg (at any depth) changed
    pytest's own section; None otherwise."""
    for path in changed:
        if posixpath.basename(path) not in ("pyproject.toml", "setup.cfg"):
            continue
        if _pytest_section(before, path) != _pytest_section(after, path):
            return f"changed the pytest configuration in {path}, which is read-only"
    return None


def _pytest_section(files: Files, path: str) -> Any:
    try:
        data = files.read_bytes(path, max_bytes=CONFIG_MAX_BYTES).decode("utf-8", "replace")
    except (OSError, ValueError, PathEscape):
        return None
    try:
        if path.endswith("pyproject.toml"):
            tool = tomllib.loads(data).get("tool")
            return tool.get("pytest") if isinstance(tool, dict) else None
        parser = configparser.RawConfigParser(interpolation=None)
        parser.read_string(data)
    except (tomllib.TOMLDecodeError, configparser.Error, RecursionError, MemoryError):
        return "<unparseable>"  # an agent's file: never an exception out of scoring
    sections = [name for name in ("tool:pytest", "pytest") if parser.has_section(name)]
    return {name: dict(parser.items(name)) for name in sections}
