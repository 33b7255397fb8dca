"""Test infrastructure the agent may not change unless the task opts out (`protect_test_infra`).

An agent that edits the judge instead of the code under test must not pass. Two kinds of
protection, because an agent may legitimately add files (a reproduction script named
`test_repro.py`) but not the ones that steer the test runner:

- `ALWAYS` globs, new files included: conftest files and pytest config files at any depth
  (pytest picks the one nearest the test paths), start-up hooks, and a module that would shadow
  pytest itself on `python -m pytest`, and distribution metadata (`*.dist-info`, `*.egg-info`):
  pytest loads the `pytest11` entry points of any it finds on sys.path, the workspace included
  (a forcing plugin passed every task that way).
- Files that existed before the agent: the tests the commands run. When a command runs pytest,
  every file matching pytest's default `python_files` (`unittest`'s `test*.py` for unittest);
  the files a command names; every file under a named directory called `test`, `tests` or
  `testing` (test data included); the script an interpreter is given (`python checks.py`).
  A named directory that is not a test directory (`pytest src/`, `--pyargs pkg`) protects only
  the test files inside it, never the code under test beside them.

The pytest sections of `pyproject.toml` and `setup.cfg` (at any depth) are compared by content,
since the rest of those files may be legitimate to edit: in the workspace and in the recorded
patch that scoring applies, whole files only; a link, a FIFO, an unreadable or oversized file
counts as a change (`pytest_config_change`).
"""

from __future__ import annotations

import configparser
import errno
import fnmatch
import os
import posixpath
import re
import shlex
import stat
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pytest_agentbench.core.evidence import runs_pytest
from pytest_agentbench.paths.files import Files, PathEscape, fold_parts
from pytest_agentbench.paths.globs import matches_any
from pytest_agentbench.paths.host_files import HostFiles
from pytest_agentbench.paths.regular_files import DIR_FLAGS, NotRegularFile
from pytest_agentbench.tools.patch_model import PatchError
from pytest_agentbench.tools.patching import plan_patch

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
    "**/*.dist-info/**",
    "**/*.egg-info/**",
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


def pytest_config_change(
    before: Files, after: Files, changed: Iterable[str], patch: str = ""
) -> str | None:
    """A violation message if a changed pyproject.toml or setup.cfg (at any depth) changed
    pytest's own section; None otherwise. `before` is the pre-agent copy, `after` the workspace,
    `patch` the recorded diff that scoring applies to the pre-agent copy: its post-image is what
    the tests run under, so it is judged too (the workspace alone can disagree with it).

    Fails closed: a file on either side that is a symbolic link (or sits in a linked folder),
    not a regular file, unreadable or over CONFIG_MAX_BYTES, or a post-image the patch does not
    give as plain text, counts as a change; nothing is ever read only in part."""
    for path in changed:
        if posixpath.basename(path) not in CONFIG_FILES:
            continue
        try:
            old = _section_of(_config_bytes(before, path), path)
            new = [_section_of(_config_bytes(after, path), path)]
            if patch:
                new.append(_section_of(_patched(_config_bytes(before, path), patch, path), path))
        except _Unjudged as exc:
            return (f"changed {path}, which is now {exc}: its pytest configuration cannot be "
                    "checked, so it counts as changed (read-only)")
        if any(section != old for section in new):
            return f"changed the pytest configuration in {path}, which is read-only"
    return None


CONFIG_FILES = ("pyproject.toml", "setup.cfg")


class _Unjudged(Exception):
    """A config file the protection cannot judge (str: what it is, e.g. 'a symbolic link')."""


def _config_bytes(files: Files, path: str) -> bytes | None:
    """The whole file, None when there is none; _Unjudged for anything else."""
    try:
        _refuse_link(files, path)
        data = files.read_bytes(path, max_bytes=CONFIG_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except PathEscape:
        raise _Unjudged("a symbolic link (or in a linked folder)") from None
    except NotRegularFile as exc:
        raise _Unjudged(f"not a regular file ({exc})") from None
    except IsADirectoryError:
        raise _Unjudged("a directory") from None
    except Exception as exc:  # noqa: BLE001 - unreadable, in whatever way: never "absent"
        raise _Unjudged(f"unreadable ({' '.join(str(exc).split())[:200]})") from None
    if len(data) > CONFIG_MAX_BYTES:
        raise _Unjudged(f"larger than {CONFIG_MAX_BYTES} bytes")
    return data


def _refuse_link(files: Files, path: str) -> None:
    """PathEscape when `path` or a folder on its way is a symbolic link. Host-side files can be
    looked at without following (a link that stays in the workspace would otherwise be read
    through); in a container the recorded patch shows a link as one (mode 120000)."""
    if not isinstance(files, HostFiles):
        return
    parts = fold_parts(path)
    fd = os.open(files.root, DIR_FLAGS)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise PathEscape(f"{path}: a folder on its way is a symbolic link") from None
                raise
            os.close(fd)
            fd = nxt
        mode = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            raise PathEscape(f"{path}: is a symbolic link")
    finally:
        os.close(fd)


def _patched(base: bytes | None, patch: str, path: str) -> bytes | None:
    """`path` after `patch` is applied to `base` (None: absent before or after), exactly as
    recorded: every section of the patch for that path, in order, hunks at their stated lines.
    _Unjudged for a link, a binary or a mode-only patch, or hunks that do not apply."""
    sections = _sections_for(patch, path)
    if not sections:
        raise _Unjudged("changed in a way the recorded patch does not show as text")
    data = base
    for section in sections:
        head = section.split("\n@@", 1)[0]
        if "GIT binary patch" in head or "\nBinary files " in head:
            raise _Unjudged("a binary patch")
        if re.search(r"^(new file mode|new mode) (?!100644$|100755$)", head, re.MULTILINE):
            raise _Unjudged("a symbolic link or other non-file (per the recorded patch)")
        if re.search(r"^deleted file mode ", head, re.MULTILINE):
            data = None
            continue
        one = _OneFile(path, data)
        try:
            data = plan_patch(one, section, one.check, max_offset=0).writes.get(path, data)
        except (PatchError, PathEscape, ValueError) as exc:
            raise _Unjudged(f"patched in a way that cannot be replayed ({exc})") from None
    if data is not None and len(data) > CONFIG_MAX_BYTES:
        raise _Unjudged(f"larger than {CONFIG_MAX_BYTES} bytes (per the recorded patch)")
    return data


def _sections_for(patch: str, path: str) -> list[str]:
    """The `diff --git` sections of `patch` whose header names `path` (git quotes names with
    odd characters: such a section matches nothing, and the caller fails closed)."""
    header = f"diff --git a/{path} b/{path}"
    sections: list[list[str]] = []
    inside = False
    for line in patch.split("\n"):  # never str.splitlines: \f or \x1c in a line is not a break
        if line.startswith("diff --git "):
            inside = line == header
            if inside:
                sections.append([])
        if inside:
            sections[-1].append(line)
    return ["\n".join(lines) + "\n" for lines in sections]


class _OneFile:
    """The `Files` port over one file's bytes, for replaying a patch section in memory."""

    def __init__(self, path: str, data: bytes | None) -> None:
        self.path, self.data = path, data

    def check(self, path: str) -> None:
        """The section's `---`/`+++` names must be its header's."""
        if path != self.path:
            raise PatchError(f"names {path}, not {self.path}")

    def read_bytes(self, path: str, max_bytes: int | None = None) -> bytes:
        if path != self.path or self.data is None:
            raise FileNotFoundError(path)
        return self.data

    def write_bytes(self, path: str, data: bytes) -> None:
        raise PathEscape(f"{path}: read-only")

    def remove(self, path: str) -> None:
        raise PathEscape(f"{path}: read-only")

    def exists(self, path: str) -> bool:
        return path == self.path and self.data is not None

    def list(self, root: str = ".", glob: str | None = None, limit: int = 1000) -> list[str]:
        return [self.path] if self.data is not None else []


def _section_of(raw: bytes | None, path: str) -> Any:
    """pytest's section of a whole config file (None: no file, or no such section)."""
    if raw is None:
        return None
    data = raw.decode("utf-8", "replace")
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
