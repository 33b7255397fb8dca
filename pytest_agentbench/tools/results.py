"""Tool policy and tool results: the data half of the tool contract.

`ToolResult.to_dict()` is the record form (plain JSON types); `to_observation()` is the compact text
the model sees.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

import regex as pyregex

from pytest_agentbench.paths.globs import matches_any

ALWAYS_READONLY = (".git", ".git/**")
FORBIDDEN_MATCH_SECONDS = 1.0  # a forbidden pattern that takes longer on a command refuses it


class ErrorType(StrEnum):
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    PATH_ESCAPE = "PATH_ESCAPE"
    NOT_FOUND = "NOT_FOUND"
    EDIT_NOT_ALLOWED = "EDIT_NOT_ALLOWED"
    WRITE_DISABLED = "WRITE_DISABLED"
    PATCH_REJECTED = "PATCH_REJECTED"
    PATCH_TOO_LARGE = "PATCH_TOO_LARGE"
    FORBIDDEN_COMMAND = "FORBIDDEN_COMMAND"
    TIMEOUT = "TIMEOUT"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"


@dataclass
class ToolPolicy:
    """What the agent's tools may do. Globs are workspace-relative with `**` (paths/globs.py);
    `forbidden_commands` are regexes searched in `run` commands (Python syntax, matched by the
    `regex` module with a timeout: a pattern that backtracks for too long on the agent's command
    counts as a match, so the command is refused). `.git` is always read-only."""

    editable_globs: list[str] | None = None
    readonly_globs: list[str] = field(default_factory=list)
    readonly_paths: frozenset[str] = frozenset()  # exact workspace paths (protected test files)
    allow_file_write: bool = True  # write_file / remove_file (apply_patch is always offered)
    max_changed_files: int | None = None  # cumulative over the Toolbox's life
    max_lines_changed: int | None = None  # cumulative added + removed lines
    forbidden_commands: list[str] = field(default_factory=list)
    tool_timeout_sec: float = 120.0
    max_output_bytes: int = 32 * 1024  # per stream, per call
    max_patch_bytes: int = 256 * 1024  # also caps write_file content
    max_read_bytes: int = 256 * 1024
    max_read_lines: int = 400
    max_search_results: int = 100
    max_list_files: int = 1000
    patch_max_offset: int = 20  # lines a hunk may sit away from its header's line
    forbidden_patterns: list[Any] = field(
        init=False, repr=False, compare=False, default_factory=list
    )

    def __post_init__(self) -> None:
        self.readonly_globs = list(self.readonly_globs) + [
            g for g in ALWAYS_READONLY if g not in self.readonly_globs
        ]
        self.forbidden_patterns = [pyregex.compile(p) for p in self.forbidden_commands]

    def is_readonly(self, path: str) -> bool:
        return path in self.readonly_paths or matches_any(path, self.readonly_globs)

    def forbidden_match(self, command: str) -> str | None:
        """The first forbidden pattern found in `command`, if any (fails closed on a timeout)."""
        for pattern in self.forbidden_patterns:
            try:
                found = pattern.search(command, timeout=FORBIDDEN_MATCH_SECONDS)
            except TimeoutError:
                return str(pattern.pattern)
            if found:
                return str(pattern.pattern)
        return None


@dataclass
class ToolResult:
    """`ok` is true exactly when `error_type` is None: the tool did what was asked. For `run` that
    means the command ran to completion; whether it succeeded is its `exit_code`."""

    ok: bool
    tool: str = ""
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    changed_files: list[str] = field(default_factory=list)
    error_type: str | None = None
    error_message: str | None = None
    duration_ms: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_n_lines: int = 0  # lines in the full stream, before truncation
    stderr_n_lines: int = 0
    total_lines: int | None = None  # read_file: lines in the whole file
    returned_line_range: tuple[int, int] | None = None  # read_file: 1-based, inclusive
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def error(cls, error_type: ErrorType, message: str, **extra: Any) -> ToolResult:
        return cls(ok=False, error_type=error_type.value, error_message=message, **extra)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.returned_line_range is not None:
            out["returned_line_range"] = list(self.returned_line_range)
        return out

    def to_observation(self) -> str:
        """Compact text for the model: the error first, then what the tool produced."""
        parts: list[str] = []
        if self.error_type:
            parts.append(f"ERROR {self.error_type}: {self.error_message}")
        if self.tool == "run":
            parts.append(self._run_text())
        elif self.tool == "read_file" and self.ok:
            parts.append(self._read_text())
        elif self.stdout:
            parts.append(self.stdout)
        return "\n".join(p for p in parts if p) or ("ok" if self.ok else "failed")

    def _run_text(self) -> str:
        lines = [f"exit_code: {self.exit_code}"]
        for name, text, cut, total in (
            ("stdout", self.stdout, self.stdout_truncated, self.stdout_n_lines),
            ("stderr", self.stderr, self.stderr_truncated, self.stderr_n_lines),
        ):
            if text:
                note = f" (truncated: {total} lines in all, head and tail kept)" if cut else ""
                lines.append(f"--- {name}{note} ---\n{text.rstrip(chr(10))}")
        return "\n".join(lines)

    def _read_text(self) -> str:
        path = self.data.get("path", "")
        if self.returned_line_range is None:
            return f"[{path}: empty file]"
        start, end = self.returned_line_range
        head = f"[{path}: lines {start}-{end} of {self.total_lines}]"
        tail = ""
        if self.stdout_truncated:
            tail = (
                f"\n[truncated at the read limit; continue with start_line={end + 1}]"
                if end < (self.total_lines or 0)
                else "\n[truncated at the read limit]"
            )
        return f"{head}\n{self.stdout}{tail}"
