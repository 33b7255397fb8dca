"""The task's rules for the agent's edits, and how an edit's size is counted.

Which paths may be edited (`check_editable`: editable_globs, readonly_globs), how much may change
in all (`check_limits`: max_changed_files, max_lines_changed, cumulative over the attempt), and
`count_changed_lines`, the measure those limits use. A refusal is EditNotAllowed, which the toolbox
turns into an EDIT_NOT_ALLOWED or LIMIT_EXCEEDED result and an `edit_refused` event; nothing is
changed by a refused edit.
"""

from __future__ import annotations

import difflib
from collections import Counter

from pytest_agentbench.paths.globs import matches_any
from pytest_agentbench.tools.results import ErrorType, ToolPolicy

EXACT_DIFF_CELLS = 4_000_000  # beyond len(a) * len(b) lines, count by multiset (linear)


class EditNotAllowed(Exception):
    """An edit the policy refuses (EDIT_NOT_ALLOWED / LIMIT_EXCEEDED); emits edit_refused."""

    def __init__(self, error_type: ErrorType, path: str, rule: str, message: str) -> None:
        super().__init__(message)
        self.error_type, self.path, self.rule = error_type, path, rule


class WriteDisabled(Exception):
    """write_file or remove_file called while the policy allows only apply_patch."""


def check_editable(policy: ToolPolicy, path: str) -> None:
    """Raise EditNotAllowed unless the task lets the agent edit `path` (normalized)."""
    editable = policy.editable_globs
    if editable is not None and not matches_any(path, editable):
        raise EditNotAllowed(
            ErrorType.EDIT_NOT_ALLOWED,
            path,
            "editable_globs",
            f"{path} may not be edited: only paths matching "
            f"{', '.join(editable) or '(nothing)'} are editable in this task",
        )
    if policy.is_readonly(path):
        raise EditNotAllowed(
            ErrorType.EDIT_NOT_ALLOWED,
            path,
            "readonly_globs",
            f"{path} is read-only in this task",
        )


def check_limits(
    policy: ToolPolicy, changed_files: set[str], lines_so_far: int, paths: set[str], lines: int
) -> None:
    """Raise EditNotAllowed if changing `paths` by `lines` more lines would go past the task's
    limits on the files (`changed_files` so far) or lines (`lines_so_far`) changed in all."""
    most_files = policy.max_changed_files
    new = sorted(paths - changed_files)
    if most_files is not None and new and len(changed_files) + len(new) > most_files:
        raise EditNotAllowed(
            ErrorType.LIMIT_EXCEEDED,
            new[0],
            "max_changed_files",
            f"this edit would change {len(changed_files) + len(new)} files "
            f"in all; the task allows at most {most_files}; nothing was changed",
        )
    most_lines = policy.max_lines_changed
    if most_lines is not None and lines_so_far + lines > most_lines:
        raise EditNotAllowed(
            ErrorType.LIMIT_EXCEEDED,
            sorted(paths)[0] if paths else "",
            "max_lines_changed",
            f"this edit would bring the lines changed to "
            f"{lines_so_far + lines}; the task allows at most {most_lines}; "
            "nothing was changed",
        )


def count_changed_lines(old: bytes, new: bytes) -> int:
    """Lines added plus lines removed. Exact by difflib after trimming the common head and
    tail; when what is left is too large for a quadratic matcher (a huge file the agent made),
    the multiset difference, a lower bound that is exact unless lines moved."""
    a = old.decode("utf-8", "replace").splitlines()
    b = new.decode("utf-8", "replace").splitlines()
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    a, b = a[head : len(a) - tail], b[head : len(b) - tail]
    if len(a) * len(b) > EXACT_DIFF_CELLS:
        removed, added = Counter(a), Counter(b)
        return sum((removed - added).values()) + sum((added - removed).values())
    changed = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        if op != "equal":
            changed += (i2 - i1) + (j2 - j1)
    return changed
