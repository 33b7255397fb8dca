"""Test infrastructure the agent may not change unless the task opts out (`protect_test_infra`).

An agent that edits the judge instead of the code under test must not pass: conftest files,
pytest's configuration, interpreter start-up hooks and the test files the task's commands run are
read-only by default. Paths the commands name are protected as given (a directory with everything
under it); when a command runs pytest, files matching pytest's default `python_files` are too, so
`pytest` with no path argument is covered. The pytest sections of `pyproject.toml` and `setup.cfg`
are compared by content, since the rest of those files may be legitimate to edit.
"""

from __future__ import annotations

import configparser
import posixpath
import shlex
import tomllib
from collections.abc import Iterable
from typing import Any

from pytest_agentbench.core.evidence import runs_pytest
from pytest_agentbench.core.ports import Files, PathEscape

ALWAYS = (
    "**/conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "tox.ini",
    "**/sitecustomize.py",
    "**/usercustomize.py",
)
PYTEST_TEST_FILES = ("**/test_*.py", "**/*_test.py")
CONFIG_MAX_BYTES = 4 * 1024 * 1024
# pytest options whose value is not a test path
OPTIONS_WITH_VALUE = frozenset({"-k", "-m", "-p", "-o", "-c", "--rootdir", "--deselect", "-W"})
INTERPRETERS = frozenset({"python", "python3", "bash", "sh", "node", "perl", "ruby"})


def protected_globs(commands: Iterable[str], files: Files) -> list[str]:
    """Read-only globs for the agent, from the task's commands and the pre-agent workspace."""
    globs = list(ALWAYS)
    for command in commands:
        if runs_pytest(command):
            globs += [g for g in PYTEST_TEST_FILES if g not in globs]
        for path in _path_arguments(command):
            try:
                if not files.exists(path):
                    continue
                glob = path if _is_file(files, path) else f"{path}/**"
            except PathEscape:  # a symlink out of the workspace: nothing of ours to protect
                continue
            if glob not in globs:
                globs.append(glob)
    return globs


def _path_arguments(command: str) -> list[str]:
    """Paths a command runs as tests: pytest's path arguments (`tests`, `tests/test_x.py::t`),
    and the script an interpreter or the shell runs (`python checks.py`, `./run_tests.sh`).
    Files a command merely reads (`grep -q ok value.txt`) are not test infrastructure."""
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
        paths += _segment_paths(segment)
    return paths


def _segment_paths(words: list[str]) -> list[str]:
    if any(runs_pytest(word) for word in words):
        start = next(i for i, word in enumerate(words) if runs_pytest(word)) + 1
        args = [w for w, prev in zip(words[start:], words[start - 1 :], strict=False)
                if prev not in OPTIONS_WITH_VALUE]
    elif words and posixpath.basename(words[0]) in INTERPRETERS:
        args = [w for w in words[1:2] if not w.startswith("-")]
    else:
        args = words[:1]
    paths = []
    for word in args:
        if word.startswith(("-", "/", "~", "$")) or "=" in word:
            continue
        path = posixpath.normpath(word.split("::", 1)[0])
        if path not in (".", "") and not path.startswith(".."):
            paths.append(path)
    return paths


def _is_file(files: Files, path: str) -> bool:
    try:
        files.read_bytes(path, max_bytes=0)
    except IsADirectoryError:
        return False
    except OSError:
        return True
    return True


def pytest_config_change(before: Files, after: Files, changed: Iterable[str]) -> str | None:
    """A violation message if a changed pyproject.toml or setup.cfg at the workspace root changed
    pytest's own section; None otherwise."""
    for path in changed:
        if path not in ("pyproject.toml", "setup.cfg"):
            continue
        if _pytest_section(before, path) != _pytest_section(after, path):
            return f"changed the pytest configuration in {path}, which is read-only"
    return None


def _pytest_section(files: Files, path: str) -> Any:
    try:
        data = files.read_bytes(path, max_bytes=CONFIG_MAX_BYTES).decode("utf-8", "replace")
    except (OSError, ValueError, PathEscape):
        return None
    if path == "pyproject.toml":
        try:
            tool = tomllib.loads(data).get("tool")
        except tomllib.TOMLDecodeError:
            return "<unparseable>"
        return tool.get("pytest") if isinstance(tool, dict) else None
    parser = configparser.RawConfigParser(interpolation=None)
    try:
        parser.read_string(data)
    except configparser.Error:
        return "<unparseable>"
    sections = [name for name in ("tool:pytest", "pytest") if parser.has_section(name)]
    return {name: dict(parser.items(name)) for name in sections}
