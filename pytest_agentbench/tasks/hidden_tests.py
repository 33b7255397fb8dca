"""A task's hidden tests (`validation.hidden_tests`): a git patch of test files that the agent
never sees, applied only for the baseline and for scoring (core/hidden_tests.py).

The file comes from the taskpack, so it is read as task input: a relative path inside the task
directory, a regular file that is not a symbolic link, at most MAX_HIDDEN_TESTS_BYTES, and a git
patch (`git diff --binary` output: modifications, additions, deletions, renames, copies, binary
files) whose every file section names safe workspace paths. `split_sections` cuts any such patch
into its file sections with the paths each touches; scoring uses it to drop the agent's edits to
the hidden paths from the agent's diff.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pytest_agentbench.paths.files import PathEscape, fold_parts
from pytest_agentbench.tasks.taskpack_files import (
    MAX_TASK_ASSET_BYTES,
    UnsafeFileError,
    open_task_file,
)

MAX_HIDDEN_TESTS_BYTES = MAX_TASK_ASSET_BYTES
GIT_HEADER = "diff --git "
DEV_NULL = "/dev/null"
# header lines that name a path: (prefix, strip the a/ or b/ prefix, a path the section changes)
_NAMED = (("rename from ", False), ("rename to ", False), ("copy to ", False),
          ("--- ", True), ("+++ ", True))
_BODY_STARTS = ("@@", "GIT binary patch", "Binary files ")


class HiddenTestsError(ValueError):
    """The hidden tests cannot be used; the message is one line."""


@dataclass(frozen=True)
class Section:
    """One file section of a git patch: its exact text and the workspace paths it changes."""

    text: str
    paths: tuple[str, ...]


@dataclass(frozen=True)
class HiddenTests:
    name: str  # as task.yaml gives it
    text: str
    paths: tuple[str, ...]  # every workspace path the patch changes, each once, in order


def split_sections(patch: str) -> tuple[str, list[Section]]:
    """(the text before the first `diff --git` line, the file sections in order). Joining the
    two back gives `patch` exactly. Raises HiddenTestsError when a section's paths cannot be
    told or are not safe workspace paths."""
    lines = patch.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith(GIT_HEADER)]
    if not starts:
        return patch, []
    preamble = "\n".join(lines[: starts[0]]) + "\n" if starts[0] else ""
    sections = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(lines)
        chunk = lines[start:end]
        text = "\n".join(chunk) + ("\n" if end < len(lines) else "")
        sections.append(Section(text, _section_paths(chunk)))
    return preamble, sections


def _section_paths(chunk: list[str]) -> tuple[str, ...]:
    found: list[str] = []
    for line in chunk[1:]:
        if line.startswith(_BODY_STARTS):
            break
        for prefix, strip in _NAMED:
            if line.startswith(prefix):
                name = _name(line[len(prefix):])
                if name != DEV_NULL:
                    found.append(name[2:] if strip and name[:2] in ("a/", "b/") else name)
    if not found:
        found.append(_git_line_name(chunk[0]))
    return tuple(dict.fromkeys(_safe(path) for path in found))


def _name(text: str) -> str:
    """A path as git writes it: C-quoted when it has special characters, else plain (git may
    end a name holding a space with a tab)."""
    text = text.rstrip("\r")
    if not text.startswith('"'):
        return text.split("\t", 1)[0]
    return _unquote(_quoted_token(text))


def _quoted_token(text: str) -> str:
    """The C-quoted name that `text` starts with, quotes included."""
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return text[: i + 1]
        else:
            i += 1
    raise HiddenTestsError(f"unterminated quoted path {text[:80]!r}")


def _unquote(token: str) -> str:
    try:
        raw = token[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        return raw.encode("latin-1").decode("utf-8", "surrogateescape")
    except (UnicodeError, ValueError):
        raise HiddenTestsError(f"cannot read the quoted path {token[:80]!r}") from None


def _git_line_name(line: str) -> str:
    """`diff --git a/NAME b/NAME` with no other line naming the file (a binary or mode-only
    change): the name, when both sides agree."""
    rest = line[len(GIT_HEADER):].rstrip("\r")
    if rest.startswith('"'):
        return _name(rest)[2:]
    half = (len(rest) - 1) // 2
    left, right = rest[:half], rest[half + 1:]
    if left.startswith("a/") and right.startswith("b/") and left[2:] == right[2:]:
        return left[2:]
    raise HiddenTestsError(f"cannot tell the file name from {line.strip()[:120]!r}")


def _safe(path: str) -> str:
    """A workspace-relative path that stays inside the workspace and out of its .git."""
    try:
        parts = fold_parts(path)
    except PathEscape as exc:
        raise HiddenTestsError(str(exc)) from None
    if not parts or parts[0].lower() == ".git" or "\\" in path:
        raise HiddenTestsError(f"{path!r} is not a file of the repository")
    return "/".join(parts)


def parse_hidden_tests(name: str, text: str) -> HiddenTests:
    """The hidden tests of `text`, or HiddenTestsError: no file section, or a bad one."""
    _, sections = split_sections(text)
    if not sections:
        raise HiddenTestsError("not a git patch (no 'diff --git' line)")
    paths = tuple(dict.fromkeys(p for section in sections for p in section.paths))
    return HiddenTests(name, text, paths)


def read_hidden_tests(task_dir: Path, name: str) -> HiddenTests:
    """Read and parse the task's hidden tests. Raises FileNotFoundError, UnsafeFileError (not
    a regular file, a link, outside the task directory, too large) or HiddenTestsError."""
    if os.path.islink(task_dir / name):
        raise UnsafeFileError(f"{name!r} is a symbolic link")
    data = open_task_file(task_dir, name, MAX_HIDDEN_TESTS_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise HiddenTestsError(
            "not UTF-8 text (write binary files with git diff --binary)") from None
    return parse_hidden_tests(name, text)


def hidden_tests_problem(task_dir: Path, name: str) -> str | None:
    """One line saying why the task's hidden tests cannot be used, or None."""
    try:
        read_hidden_tests(task_dir, name)
    except FileNotFoundError:
        return f"no such file: {name}"
    except (UnsafeFileError, HiddenTestsError) as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    return None
