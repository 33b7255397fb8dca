"""Strict unified-diff parser: `diff --git` and plain `---`/`+++` forms.

Hunk bodies are read by the counts in their `@@` headers and a body that disagrees with its header
is an error (a miscounted header is the most common way a model's patch goes wrong, and silently
re-counting would hide hunks that end in the wrong place). Line terminators are kept apart from
line text, so CRLF files and `\\ No newline at end of file` round-trip exactly. What it builds
(FilePatch, Hunk, HunkLine) and PatchError are in tools/patch_model.py.
"""

from __future__ import annotations

import re

from pytest_agentbench.paths.files import PathEscape, fold_parts
from pytest_agentbench.tools.patch_model import FilePatch, Hunk, HunkLine, PatchError, Tag

DEV_NULL = "/dev/null"
HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


def normalize_path(path: str) -> str:
    """Workspace-relative POSIX path with `.`/`..` folded; raises PathEscape when it leaves."""
    parts = fold_parts(path)
    if not parts:
        raise PathEscape(f"{path!r} names the workspace root, not a file")
    return "/".join(parts)


def _unquote(name: str) -> str:
    """Git C-quotes names with special characters: "a/t\\303\\251st"."""
    if not (len(name) >= 2 and name.startswith('"') and name.endswith('"')):
        return name
    raw = name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return raw.encode("latin-1").decode("utf-8", "surrogateescape")


def _header_name(rest: str) -> str:
    rest = rest.rstrip("\r")
    if not rest.startswith('"'):
        rest = rest.split("\t", 1)[0].rstrip(" ")
    return _unquote(rest)


def _strip_prefix(name: str, prefix: str, strip: bool) -> str:
    if name == DEV_NULL:
        return name
    return name[len(prefix) :] if strip and name.startswith(prefix) else name


class _Section:
    """A file section being parsed."""

    def __init__(self, git_line: str | None) -> None:
        self.git_line = git_line
        self.old: str | None = None
        self.new: str | None = None
        self.rename_from: str | None = None
        self.rename_to: str | None = None
        self.new_file = False
        self.deleted_file = False
        self.hunks: list[Hunk] = []

    def has_names(self) -> bool:
        return self.old is not None

    def finish(self) -> FilePatch | None:
        git = self.git_line is not None
        old, new = self.old, self.new
        if old is not None and new is not None:
            strip = git or (
                (old.startswith("a/") or old == DEV_NULL)
                and (new.startswith("b/") or new == DEV_NULL)
            )
            old, new = _strip_prefix(old, "a/", strip), _strip_prefix(new, "b/", strip)
        if self.rename_from is not None or self.rename_to is not None:
            if self.rename_from is None or self.rename_to is None:
                raise PatchError(
                    "'rename from' and 'rename to' must come together",
                    file=self.rename_from or self.rename_to,
                )
            old, new = self.rename_from, self.rename_to
        if old is None and self.git_line is not None:
            old = new = _git_line_name(self.git_line)
            if self.new_file:
                old = DEV_NULL
            if self.deleted_file:
                new = DEV_NULL
        if old is None or new is None:
            raise PatchError("file section has no '---'/'+++' lines")
        if old == DEV_NULL and new == DEV_NULL:
            raise PatchError("both sides of a file section are /dev/null")
        patch = FilePatch(
            old_path=None if old == DEV_NULL else normalize_path(old),
            new_path=None if new == DEV_NULL else normalize_path(new),
            hunks=self.hunks,
            rename=self.rename_from is not None,
        )
        if not patch.hunks and patch.kind == "modify":
            if git:
                return None  # a mode-only change: nothing to do in the workspace
            raise PatchError(
                "no hunks ('@@ -start,count +start,count @@') for this file", file=patch.path
            )
        return patch


def _git_line_name(line: str) -> str:
    """`diff --git a/NAME b/NAME`: the name, when both sides agree (no ---/+++ to go by)."""
    rest = line[len("diff --git ") :].rstrip("\r")
    if rest.startswith('"'):
        end = rest.index('"', 1) + 1 if '"' in rest[1:] else len(rest)
        return _strip_prefix(_unquote(rest[:end]), "a/", True)
    half = (len(rest) - 1) // 2
    left, right = rest[:half], rest[half + 1 :]
    if left.startswith("a/") and right.startswith("b/") and left[2:] == right[2:]:
        return left[2:]
    if left == right:  # git diff --no-prefix
        return left
    raise PatchError(f"cannot tell the file name from {line.strip()!r}")


def parse_patch(text: str) -> list[FilePatch]:
    """Parse every file section of a unified diff. Text outside file sections is ignored."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    sections: list[_Section] = []
    current: _Section | None = None
    i = 0
    while i < len(lines):
        clean = lines[i].rstrip("\r")
        if clean.startswith("diff --git "):
            current = _Section(clean)
            sections.append(current)
            i += 1
        elif clean.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if current is None or current.has_names() or current.hunks:
                current = _Section(None)
                sections.append(current)
            current.old = _header_name(clean[4:])
            current.new = _header_name(lines[i + 1][4:])
            i += 2
        elif clean.startswith("@@"):
            if current is None:
                raise PatchError("hunk before any file header ('--- a/path' / '+++ b/path')")
            i = _read_hunk(lines, i, current)
        elif current is not None and current.git_line is not None and not current.hunks:
            _git_header(clean, current)
            i += 1
        else:
            i += 1  # prose, code fences, "Index:" lines: not part of any file section
    patches = [p for p in (s.finish() for s in sections) if p is not None]
    if not patches and not sections:
        raise PatchError(
            "no file changes found: expected a unified diff with '--- a/path' and "
            "'+++ b/path' lines followed by '@@' hunks"
        )
    return patches


def _git_header(clean: str, section: _Section) -> None:
    if clean.startswith("rename from "):
        section.rename_from = _header_name(clean[len("rename from ") :])
    elif clean.startswith("rename to "):
        section.rename_to = _header_name(clean[len("rename to ") :])
    elif clean.startswith("new file mode"):
        section.new_file = True
    elif clean.startswith("deleted file mode"):
        section.deleted_file = True
    elif clean.startswith(("copy from ", "copy to ")):
        raise PatchError(
            "'copy from/to' patches are not supported; create the file instead",
            file=clean.split(" ", 2)[-1],
        )
    elif clean.startswith(("Binary files ", "GIT binary patch")):
        raise PatchError("binary patches are not supported")
    # index/mode/similarity lines and anything unknown are ignored, as git does


def _read_hunk(lines: list[str], start: int, section: _Section) -> int:
    header = lines[start].rstrip("\r")
    index = len(section.hunks) + 1
    name = _section_name(section)
    match = HUNK_HEADER.match(header)
    if not match:
        raise PatchError(
            "malformed hunk header; expected '@@ -start,count +start,count @@'",
            file=name,
            hunk_index=index,
            hunk_header=header,
        )
    old_start, new_start = int(match[1]), int(match[3])
    old_count = 1 if match[2] is None else int(match[2])
    new_count = 1 if match[4] is None else int(match[4])
    if (old_start == 0 and old_count) or (new_start == 0 and new_count):
        raise PatchError(
            "line numbers in a hunk header start at 1 (0 only with a count of 0)",
            file=name,
            hunk_index=index,
            hunk_header=header,
        )
    hunk = Hunk(old_start, old_count, new_start, new_count, header[: header.index("@@", 2) + 2])
    try:
        i = _read_counted(lines, start, hunk, name, index)
    except PatchError as miscounted:  # models miscount headers: recount from the body
        hunk = Hunk(old_start, old_count, new_start, new_count, hunk.header)
        i = _recount(lines, start, hunk, name, index, miscounted)
    section.hunks.append(hunk)
    return i


def _read_counted(lines: list[str], start: int, hunk: Hunk, name: str | None,
                  index: int) -> int:
    """The body the header's counts announce; PatchError when the body does not have them."""
    old_left, new_left = hunk.old_count, hunk.new_count
    i = start + 1
    while old_left > 0 or new_left > 0:
        raw = lines[i] if i < len(lines) else None
        if raw is not None and raw.startswith("\\"):
            _mark_no_newline(hunk, name, index)
            i += 1
            continue
        tag = _raw_tag(raw)
        if tag is None or (tag != "+" and old_left == 0) or (tag != "-" and new_left == 0):
            raise _count_error(lines, start, hunk, name, index)
        assert raw is not None
        _append(hunk, tag, raw)
        old_left -= tag != "+"
        new_left -= tag != "-"
        i += 1
    if i < len(lines) and lines[i].startswith("\\"):
        _mark_no_newline(hunk, name, index)
        i += 1
    after = i
    while after < len(lines) and lines[after].strip() == "":
        after += 1  # blank lines between sections are separators, not uncounted context
    if _body_tag(lines, after) is not None:
        raise _count_error(lines, start, hunk, name, index)
    return i


def _recount(lines: list[str], start: int, hunk: Hunk, name: str | None, index: int,
             miscounted: PatchError) -> int:
    """The hunk's body as `git apply --recount` reads it: every body line up to the next
    hunk, file header or non-body line (blank lines before one of those are separators). The
    counts come from the body; the header's are kept in `stated_counts`. A body without a
    changed line, or one whose last line is a blank line that could be context or separator
    before more body lines, cannot be read one way only: refused with the count error."""
    i = start + 1
    while i < len(lines):
        if lines[i].startswith("\\"):
            _mark_no_newline(hunk, name, index)
            i += 1
            continue
        tag = _body_tag(lines, i)
        if tag is None or _is_trailing_blank(lines, i):
            break
        _append(hunk, tag, lines[i])
        i += 1
    changed = [line for line in hunk.lines if line.tag != " "]
    if not changed:
        raise miscounted
    hunk.stated_counts = (hunk.old_count, hunk.new_count)
    hunk.old_count, hunk.new_count = len(hunk.old_lines), len(hunk.new_lines)
    return i


def _append(hunk: Hunk, tag: Tag, raw: str) -> None:
    body = raw[1:] if raw not in ("", "\r") else raw
    crlf = body.endswith("\r")
    hunk.lines.append(HunkLine(tag, body[:-1] if crlf else body, crlf))


def _section_name(section: _Section) -> str | None:
    for name in (section.new, section.old):
        if name and name != DEV_NULL:
            return _strip_prefix(_strip_prefix(name, "b/", True), "a/", True)
    return None


def _raw_tag(raw: str | None) -> Tag | None:
    """The tag of a line inside a hunk body (an empty line is an empty context line)."""
    if raw is None:
        return None
    if raw in ("", "\r"):
        return " "
    if raw[0] in " -+":
        return raw[0]  # type: ignore[return-value]
    return None


def _body_tag(lines: list[str], i: int) -> Tag | None:
    """Like _raw_tag for a line after a hunk's counted body: file headers end the hunk."""
    if i >= len(lines):
        return None
    raw = lines[i]
    if raw.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
        return None
    if raw.rstrip("\r") == "-- ":
        return None  # git format-patch signature separator
    return _raw_tag(raw)


def _is_trailing_blank(lines: list[str], i: int) -> bool:
    rest = lines[i:]
    return all(line.strip() == "" for line in rest) or (
        rest[0].strip() == "" and _body_tag(lines, i + 1) is None
    )


def _mark_no_newline(hunk: Hunk, name: str | None, index: int) -> None:
    if not hunk.lines:
        raise PatchError(
            "'\\ No newline at end of file' before any hunk line",
            file=name,
            hunk_index=index,
            hunk_header=hunk.header,
        )
    hunk.lines[-1].no_newline = True


def _count_error(
    lines: list[str], start: int, hunk: Hunk, name: str | None, index: int
) -> PatchError:
    old = new = 0
    i = start + 1
    while (tag := _body_tag(lines, i)) is not None or (
        i < len(lines) and lines[i].startswith("\\")
    ):
        if _is_trailing_blank(lines, i):
            break
        if tag is not None:
            old += tag != "+"
            new += tag != "-"
        i += 1
    return PatchError(
        f"hunk header counts do not match the body: the header says {hunk.old_count} old / "
        f"{hunk.new_count} new lines, the body has {old} old (' ' and '-') / {new} new "
        "(' ' and '+') lines; fix the counts in the @@ header",
        file=name,
        hunk_index=index,
        hunk_header=hunk.header,
    )
