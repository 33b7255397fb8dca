"""Apply unified diffs strictly, all-or-nothing, over a confined `Files` object.

Context and removed lines must match the file exactly (line terminators aside) at the stated line,
or within a small offset of it; there is no fuzzy matching. A hunk header whose counts do not
match its body is recounted from the body, as `git apply --recount` does (models miscount them
all the time), and the outcome says so (`recounted`); a body that cannot be read one way only is
still refused. Every file and hunk is validated against
an in-memory overlay before the first write, and a write that still fails (a symlink planted in
between, a full disk) rolls back the writes already made. When a hunk does not match, PatchError
says which file and hunk, why, and shows the closest region of the real file with line numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_agentbench.paths.files import Files
from pytest_agentbench.tools.patch_context import describe_mismatch, nearest_context
from pytest_agentbench.tools.patch_model import FilePatch, Hunk, HunkLine, PatchError
from pytest_agentbench.tools.patch_parse import normalize_path, parse_patch

__all__ = [
    "DEFAULT_MAX_OFFSET",
    "FilePatch",
    "Hunk",
    "HunkLine",
    "PatchError",
    "PatchOutcome",
    "PatchPlan",
    "apply_patch",
    "normalize_path",
    "parse_patch",
    "plan_patch",
]

DEFAULT_MAX_OFFSET = 20
Line = tuple[str, str]  # (text, terminator: "\n", "\r\n" or "" for a last line without one)


@dataclass
class PatchOutcome:
    changed_files: list[str] = field(default_factory=list)  # every path created/modified/removed
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    lines_added: int = 0
    lines_removed: int = 0
    offsets: list[tuple[str, int, int]] = field(default_factory=list)  # (file, hunk #, offset)
    # hunks whose header counts were wrong and recounted from the body:
    # (file, hunk #, stated old, stated new, old, new)
    recounted: list[tuple[str, int, int, int, int, int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        parts = [f"{p} (modified)" for p in self.modified]
        parts += [f"{p} (created)" for p in self.created]
        parts += [f"{p} (deleted)" for p in self.deleted]
        parts += [f"{a} -> {b} (renamed)" for a, b in self.renamed]
        text = (
            f"Patch applied: {len(self.changed_files)} file(s) changed, "
            f"+{self.lines_added} -{self.lines_removed} lines"
        )
        if parts:
            text += ": " + ", ".join(parts)
        for path, index, offset in self.offsets:
            text += f"\nnote: {path} hunk #{index} applied at offset {offset:+d} lines"
        for path, index, old_said, new_said, old, new in self.recounted:
            text += (f"\nnote: {path} hunk #{index}: its header said {old_said} old / "
                     f"{new_said} new lines, the body has {old} / {new}: counts corrected")
        return text


@dataclass
class PatchPlan:
    """A validated patch: the final content of every touched path, ready to commit."""

    outcome: PatchOutcome
    writes: dict[str, bytes | None]  # path -> new bytes, or None to remove it
    originals: dict[str, bytes | None]

    def commit(self, files: Files) -> PatchOutcome:
        done: list[str] = []
        ordered = sorted(self.writes, key=lambda p: self.writes[p] is not None)  # removals first
        try:
            for path in ordered:
                data = self.writes[path]
                if data is None:
                    files.remove(path)
                else:
                    files.write_bytes(path, data)
                done.append(path)
        except BaseException:
            self._rollback(files, done)
            raise
        return self.outcome

    def _rollback(self, files: Files, done: list[str]) -> None:
        for path in reversed(done):
            original = self.originals.get(path)
            try:
                if original is None:
                    files.remove(path)
                else:
                    files.write_bytes(path, original)
            except Exception:  # best effort; the first error is re-raised
                continue


def apply_patch(
    files: Files,
    text: str,
    check_path: Callable[[str], None] | None = None,
    max_offset: int = DEFAULT_MAX_OFFSET,
) -> PatchOutcome:
    """Parse, validate and apply `text`; nothing is written unless every file and hunk applies.
    `check_path` is called with every path touched (old and new) first and raises to refuse."""
    return plan_patch(files, text, check_path, max_offset).commit(files)


def plan_patch(
    files: Files,
    text: str,
    check_path: Callable[[str], None] | None = None,
    max_offset: int = DEFAULT_MAX_OFFSET,
) -> PatchPlan:
    patches = parse_patch(text)
    if check_path is not None:
        for patch in patches:
            for path in (patch.old_path, patch.new_path):
                if path is not None:
                    check_path(path)
    return _Planner(files, max_offset).plan(patches)


class _Planner:
    def __init__(self, files: Files, max_offset: int) -> None:
        self.files = files
        self.max_offset = max_offset
        self.state: dict[str, bytes | None] = {}
        self.originals: dict[str, bytes | None] = {}
        self.outcome = PatchOutcome()

    def plan(self, patches: list[FilePatch]) -> PatchPlan:
        for patch in patches:
            self._plan_file(patch)
        writes = {p: d for p, d in self.state.items() if d != self.originals[p]}
        out = self.outcome
        out.changed_files = sorted(writes)
        out.created = [p for p in out.created if p in writes and self.originals[p] is None]
        out.deleted = [p for p in out.deleted if p in writes and writes[p] is None]
        out.modified = sorted({p for p in out.modified if p in writes} - set(out.created))
        return PatchPlan(out, writes, dict(self.originals))

    def _current(self, path: str) -> bytes | None:
        if path not in self.state:
            try:
                data: bytes | None = self.files.read_bytes(path)
            except FileNotFoundError:
                data = None
            except NotADirectoryError as exc:
                raise PatchError(
                    "a parent of this path is a file, not a directory", file=path
                ) from exc
            except IsADirectoryError as exc:
                raise PatchError("is a directory, not a file", file=path) from exc
            self.state[path] = self.originals[path] = data
        return self.state[path]

    def _plan_file(self, patch: FilePatch) -> None:
        kind = patch.kind
        old = self._current(patch.old_path) if patch.old_path is not None else None
        new_existing = self._current(patch.new_path) if patch.new_path is not None else None
        if patch.old_path is not None and old is None:
            raise PatchError(
                "file not found; to create it, use '--- /dev/null'", file=patch.old_path
            )
        if kind in ("create", "rename") and new_existing is not None:
            hint = "patch it with '--- a/path' instead" if kind == "create" else "remove it first"
            raise PatchError(f"file already exists; {hint}", file=patch.new_path)
        if patch.hunks or kind == "delete":
            result = self._apply_hunks(patch, old or b"")
        else:
            result = old or b""
        if kind == "delete":
            assert patch.old_path is not None
            if result:
                remaining = len(_split_lines(_decode(result)))
                raise PatchError(
                    f"a delete patch must remove the whole file: {remaining} line(s) of it are "
                    "not in the patch (or use remove_file)",
                    file=patch.old_path,
                    nearest_context=nearest_context(_split_lines(_decode(old or b"")), [], 0),
                )
            self.state[patch.old_path] = None
            self.outcome.deleted.append(patch.old_path)
            return
        assert patch.new_path is not None
        self.state[patch.new_path] = result
        if kind == "rename":
            assert patch.old_path is not None
            self.state[patch.old_path] = None
            self.outcome.renamed.append((patch.old_path, patch.new_path))
        elif kind == "create":
            self.outcome.created.append(patch.new_path)
        else:
            self.outcome.modified.append(patch.new_path)

    def _apply_hunks(self, patch: FilePatch, data: bytes) -> bytes:
        name = patch.path
        if b"\0" in data[:8192]:
            raise PatchError("binary file: patches only apply to text files", file=name)
        lines = _split_lines(_decode(data))
        default_eol = _dominant_eol(lines)
        literal_eols = any(hl.crlf for h in patch.hunks for hl in h.lines)
        out: list[Line] = []
        cursor = carried = 0
        for index, hunk in enumerate(patch.hunks, start=1):
            stated = hunk.old_start if hunk.old_count == 0 else hunk.old_start - 1
            pos = self._locate(lines, hunk, stated + carried, cursor)
            if pos is None and carried:
                pos = self._locate(lines, hunk, stated, cursor)
            if pos is None:
                raise PatchError(
                    describe_mismatch(lines, hunk, stated, cursor, self.max_offset),
                    file=name,
                    hunk_index=index,
                    hunk_header=hunk.header,
                    nearest_context=nearest_context(
                        lines, [hl.text for hl in hunk.old_lines], stated
                    ),
                )
            carried = pos - stated
            if carried:
                self.outcome.offsets.append((name, index, carried))
            if hunk.stated_counts is not None:
                self.outcome.recounted.append((name, index, *hunk.stated_counts,
                                               hunk.old_count, hunk.new_count))
            out.extend(lines[cursor:pos])
            cursor = pos
            for hl in hunk.lines:
                if hl.tag == " ":
                    out.append(lines[cursor])
                    cursor += 1
                elif hl.tag == "-":
                    cursor += 1
                    self.outcome.lines_removed += 1
                else:
                    eol = (
                        ""
                        if hl.no_newline
                        else (("\r\n" if hl.crlf else "\n") if literal_eols else default_eol)
                    )
                    out.append((hl.text, eol))
                    self.outcome.lines_added += 1
        out.extend(lines[cursor:])
        for k in range(len(out) - 1):  # a line that gained a successor needs a terminator
            if out[k][1] == "":
                out[k] = (out[k][0], default_eol)
        return "".join(text + eol for text, eol in out).encode("utf-8", "surrogateescape")

    def _locate(self, lines: list[Line], hunk: Hunk, base: int, cursor: int) -> int | None:
        """Where the hunk's old lines sit: `base`, else the nearest match within the offset."""
        old = [hl.text for hl in hunk.old_lines]
        if not old:
            return base if cursor <= base <= len(lines) else None
        for delta in _deltas(self.max_offset):
            pos = base + delta
            if pos < cursor or pos + len(old) > len(lines):
                continue
            if all(lines[pos + k][0] == text for k, text in enumerate(old)):
                return pos
        return None


def _deltas(limit: int) -> list[int]:
    out = [0]
    for d in range(1, limit + 1):
        out += [-d, d]
    return out


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _split_lines(text: str) -> list[Line]:
    """Split on \\n only (never on \\f, \\v or U+2028 as str.splitlines does)."""
    pieces = text.split("\n")
    lines: list[Line] = []
    for piece in pieces[:-1]:
        lines.append((piece[:-1], "\r\n") if piece.endswith("\r") else (piece, "\n"))
    if pieces[-1]:
        lines.append((pieces[-1], ""))
    return lines


def _dominant_eol(lines: list[Line]) -> str:
    crlf = sum(1 for _, eol in lines if eol == "\r\n")
    lf = sum(1 for _, eol in lines if eol == "\n")
    return "\r\n" if crlf > lf else "\n"
