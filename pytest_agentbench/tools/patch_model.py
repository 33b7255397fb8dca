"""What a parsed unified diff is (FilePatch, Hunk, HunkLine) and PatchError, the one error of
the patch engine (parse_patch in patch_parse, apply in patching), with what a model needs to fix
its patch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Tag = Literal[" ", "-", "+"]


class PatchError(Exception):
    """The patch cannot be parsed or applied. `hunk_index` is 1-based (None: a file-level error).
    `nearest_context` shows the closest region of the real file, numbered, so the patch can be
    fixed."""

    def __init__(
        self,
        reason: str,
        *,
        file: str | None = None,
        hunk_index: int | None = None,
        hunk_header: str | None = None,
        nearest_context: str | None = None,
    ) -> None:
        self.reason = reason
        self.file = file
        self.hunk_index = hunk_index
        self.hunk_header = hunk_header
        self.nearest_context = nearest_context
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.file or "patch"
        if self.hunk_index is not None:
            where += f": hunk #{self.hunk_index}"
            if self.hunk_header:
                where += f" ({self.hunk_header})"
        text = f"{where}: {self.reason}"
        if self.nearest_context:
            text += f"\nNearest matching region of {self.file}:\n{self.nearest_context}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "hunk_index": self.hunk_index,
            "hunk_header": self.hunk_header,
            "reason": self.reason,
            "nearest_context": self.nearest_context,
        }


@dataclass
class HunkLine:
    tag: Tag
    text: str  # without its line terminator
    crlf: bool = False  # the patch line itself ended in \r\n
    no_newline: bool = False  # followed by "\ No newline at end of file"


@dataclass
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    header: str
    lines: list[HunkLine] = field(default_factory=list)
    # the header's (old, new) counts when they did not match the body and were recounted from
    # it, as `git apply --recount` does; None when they matched
    stated_counts: tuple[int, int] | None = None

    @property
    def old_lines(self) -> list[HunkLine]:
        return [line for line in self.lines if line.tag != "+"]

    @property
    def new_lines(self) -> list[HunkLine]:
        return [line for line in self.lines if line.tag != "-"]


@dataclass
class FilePatch:
    old_path: str | None  # None: created
    new_path: str | None  # None: deleted
    hunks: list[Hunk] = field(default_factory=list)
    rename: bool = False

    @property
    def kind(self) -> Literal["create", "delete", "rename", "modify"]:
        if self.old_path is None:
            return "create"
        if self.new_path is None:
            return "delete"
        if self.rename or self.old_path != self.new_path:
            return "rename"
        return "modify"

    @property
    def path(self) -> str:
        """The name to report this file by."""
        return self.new_path or self.old_path or "?"
