"""The read-only tools (list_files, read_file, search), host-side over a confined `Files`.

They raise PathEscape / FileNotFoundError / IsADirectoryError / NotRegularFile / GlobError for the
Toolbox to map to error types; everything else they report in the ToolResult they return.

Everything here runs on the host over data the agent controls, so everything is bounded: listings
by entry count, depth and the call's deadline (paths/walk.py), globs by a linear-time matcher
(paths/globs.py), and search by a file-count cap, the call's deadline (`tool_timeout_sec`) and, for
regexes, the `regex` module's timeout on every match, so a backtracking pattern stops with a
TIMEOUT error instead of burning the host's CPU. A cut result says what was cut.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Iterator
from typing import Any, cast

import regex as pyregex

from pytest_agentbench.paths.deadline import current_deadline
from pytest_agentbench.paths.files import Files, PathEscape
from pytest_agentbench.paths.globs import matches_any
from pytest_agentbench.paths.walk import Listing
from pytest_agentbench.sandbox.port import SandboxError
from pytest_agentbench.text.truncation import count_lines, truncate
from pytest_agentbench.tools.patch_parse import normalize_path
from pytest_agentbench.tools.results import ErrorType, ToolPolicy, ToolResult

READ_HARD_LIMIT = 32 * 1024 * 1024  # read_file refuses files larger than this outright
SEARCH_MAX_FILE_BYTES = 2 * 1024 * 1024  # search skips files larger than this
SEARCH_MAX_FILES = 50_000  # search reads at most this many files per call
SEARCH_MAX_QUERY_CHARS = 4096
SEARCH_LINE_CHARS = 300
# One timed regex call (a whole-file scan, or one line) may take this long, at most. The regex
# module counts the process's CPU time, so it bounds the host CPU a pattern burns; on a loaded
# machine the wall time stretches accordingly (the call's deadline is checked between calls).
REGEX_LINE_SECONDS = 2.0
BINARY_SNIFF = 8192
LIST_MAX_FILES = 200_000  # files a listing collects before the glob filter
_CLOCK_EVERY = 1024  # paths or lines between two looks at the clock


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:BINARY_SNIFF]


def glob_filter(path: str, root: str, glob: str | None) -> bool:
    """A glob without '/' matches file names at any depth ('*.py'); one with '/' matches the path
    relative to `root` or to the workspace ('src/**/test_*.py')."""
    if not glob:
        return True
    if "/" not in glob.strip("/"):
        return matches_any(path.rpartition("/")[2], [glob.strip("/")])
    relative = path[len(root) + 1 :] if root != "." and path.startswith(root + "/") else path
    return matches_any(relative, [glob]) or matches_any(path, [glob])


def list_workspace(
    files: Files, root: str, glob: str | None, deadline: float | None = None
) -> tuple[list[str], str | None]:
    """The files under `root` that `glob` selects, and why the list may be incomplete (None when
    it is whole): the listing's caps or the deadline (by default the current tool call's)."""
    if deadline is None:
        deadline = current_deadline()
    root = "." if root.strip() in ("", ".", "./") else normalize_path(root)
    listed = files.list(root, None, limit=LIST_MAX_FILES)  # raises PathEscape for a symlink out
    incomplete = listed.incomplete if isinstance(listed, Listing) else None
    if len(listed) >= LIST_MAX_FILES and incomplete is None:
        incomplete = f"stopped at {LIST_MAX_FILES} files"
    if root != "." and not listed:
        if not files.exists(root):
            raise FileNotFoundError(f"no such directory: {root}")
        try:
            files.read_bytes(root, max_bytes=0)
        except IsADirectoryError:
            pass
        else:
            raise NotADirectoryError(f"{root} is a file, not a directory; use read_file")
    if not glob:
        return list(listed), incomplete
    kept: list[str] = []
    for number, path in enumerate(listed):
        if number % _CLOCK_EVERY == 0 and deadline is not None and time.monotonic() > deadline:
            incomplete = incomplete or "stopped at the time limit"
            break
        if glob_filter(path, root, glob):
            kept.append(path)
    return kept, incomplete


def list_files(files: Files, policy: ToolPolicy, root: str, glob: str | None) -> ToolResult:
    try:
        found, incomplete = list_workspace(files, root, glob)
    except NotADirectoryError as exc:
        return ToolResult.error(ErrorType.INVALID_ARGUMENTS, str(exc))
    shown = found[: policy.max_list_files]
    text = "\n".join(shown)
    if len(found) > len(shown):
        text += (
            f"\n[showing the first {len(shown)} of {len(found)} files; narrow the listing "
            "with root= or glob=]"
        )
    elif not found:
        text = "(no files)"
    if incomplete:
        text += f"\n[listing incomplete: {incomplete}; narrow it with root= or glob=]"
    cut = len(found) > len(shown) or incomplete is not None
    return ToolResult(
        ok=True,
        stdout=text,
        stdout_truncated=cut,
        stdout_n_lines=len(found),
        data={"files": shown, "count": len(found), "incomplete": incomplete},
    )


def read_file(
    files: Files, policy: ToolPolicy, path: str, start_line: int | None, end_line: int | None
) -> ToolResult:
    path = normalize_path(path)
    try:
        data = files.read_bytes(path, max_bytes=READ_HARD_LIMIT + 1)
    except FileNotFoundError:
        raise FileNotFoundError(f"no such file: {path}{_did_you_mean(files, path)}") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"{path} is a directory; use list_files") from None
    if len(data) > READ_HARD_LIMIT:
        return ToolResult.error(
            ErrorType.LIMIT_EXCEEDED,
            f"{path} is larger than "
            f"{READ_HARD_LIMIT // (1024 * 1024)} MiB; use run with head, "
            "tail or sed -n to look at parts of it",
        )
    if is_binary(data):
        return ToolResult.error(
            ErrorType.INVALID_ARGUMENTS,
            f"{path} is a binary file ({len(data)} bytes); read_file only shows text files",
        )
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    total = len(lines)
    start = start_line or 1
    end = min(end_line or total, total)
    if end_line is not None and start > end_line:
        return ToolResult.error(
            ErrorType.INVALID_ARGUMENTS, f"start_line ({start}) is after end_line ({end_line})"
        )
    info = {"path": path, "line_endings": "crlf" if "\r\n" in text else "lf"}
    if total == 0:
        return ToolResult(ok=True, total_lines=0, data=info)
    if start > total:
        return ToolResult.error(
            ErrorType.INVALID_ARGUMENTS,
            f"start_line {start} is past the end of {path} ({total} lines)",
            total_lines=total,
        )
    end_cap = min(end, start + policy.max_read_lines - 1)
    out: list[str] = []
    size = 0
    cut = end_cap < end
    for number in range(start, end_cap + 1):
        line = lines[number - 1].removesuffix("\r") + "\n"
        encoded = len(line.encode())
        if size + encoded > policy.max_read_bytes:
            cut = True
            if not out:  # a single huge line: show its beginning
                out.append(line.encode()[: policy.max_read_bytes].decode("utf-8", "ignore"))
            break
        out.append(line)
        size += encoded
    last = start + len(out) - 1
    return ToolResult(
        ok=True,
        stdout="".join(out),
        stdout_truncated=cut,
        stdout_n_lines=len(out),
        total_lines=total,
        returned_line_range=(start, last),
        data=info,
    )


class _SlowRegex(Exception):
    def __init__(self, path: str, line: int) -> None:
        super().__init__(f"{path}:{line}")
        self.path, self.line = path, line


# Constructs under which a match on a line alone might not be found by a search of the whole file
# (anchors to the string's ends, lookaround, atomic and possessive parts, verbs, fuzzy counts,
# scoped or exotic flags). Escapes are not parsed: a false alarm only costs speed.
_NOT_LINE_LOCAL = pyregex.compile(
    r"\\[AZzGK]|\(\?(?![:#]|P[<=]|<(?![=!])|[aiLmsux]+[:)])|\(\*|[*+?}]\+|\{(?![\d,]*\})"
)


class _Matcher:
    """Which lines of a text contain a match of the query: a literal substring test, or a
    Python-syntax regex (the `regex` module, compatible with `re`) with a timeout on every call.

    Checking every line with its own timed call costs ~4 us a line, so for a regex without the
    constructs above the whole file is searched first (MULTILINE, one call): a line that matches
    on its own also matches there, at the same offset, so the leftmost match from the start of a
    line is never past the next line that matches on its own. Only the line holding that match is
    checked exactly, and the search goes on from the next line."""

    def __init__(self, query: str, is_regex: bool) -> None:
        self.literal = query
        self.pattern: Any = pyregex.compile(query) if is_regex else None
        self.scan: Any = None
        if is_regex and not _NOT_LINE_LOCAL.search(query):
            self.scan = pyregex.compile(query, pyregex.MULTILINE)

    def lines(self, path: str, text: str, deadline: float) -> Iterator[tuple[int, str]]:
        """(number, line) of each matching line. Raises TimeoutError past the deadline and
        _SlowRegex for one call that takes longer than REGEX_LINE_SECONDS."""
        if self.pattern is None:
            if self.literal in text:
                for number, line in enumerate(text.split("\n"), start=1):
                    if self.literal in line:
                        yield number, line
            return
        if self.scan is None:
            for number, line in enumerate(text.split("\n"), start=1):
                if self._timed(self.pattern, line, 0, path, number, deadline):
                    yield number, line
            return
        pos, number = 0, 1
        while pos <= len(text):
            found = self._timed(self.scan, text, pos, path, number, deadline)
            if found is None:
                return
            start = text.rfind("\n", 0, found.start()) + 1
            number += text.count("\n", pos, start)
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
            line = text[start:end]
            if self._timed(self.pattern, line, 0, path, number, deadline):
                yield number, line
            pos, number = end + 1, number + 1

    @staticmethod
    def _timed(pattern: Any, text: str, pos: int, path: str, number: int, deadline: float) -> Any:
        budget = deadline - time.monotonic()
        if budget <= 0:
            raise TimeoutError
        try:
            return pattern.search(text, pos, timeout=min(budget, REGEX_LINE_SECONDS))
        except TimeoutError:
            if budget > REGEX_LINE_SECONDS:
                raise _SlowRegex(path, number) from None
            raise


def search(
    files: Files,
    policy: ToolPolicy,
    query: str,
    glob: str | None,
    max_results: int,
    regex: bool,
    deadline: float,
) -> ToolResult:
    if not query:
        return ToolResult.error(ErrorType.INVALID_ARGUMENTS, "query must not be empty")
    if len(query) > SEARCH_MAX_QUERY_CHARS:
        return ToolResult.error(
            ErrorType.INVALID_ARGUMENTS,
            f"query is {len(query)} characters long; the limit is {SEARCH_MAX_QUERY_CHARS}",
        )
    try:
        matcher = _Matcher(query, regex)
    except (_regex_error(), OverflowError, RecursionError) as exc:
        return ToolResult.error(
            ErrorType.INVALID_ARGUMENTS,
            f"invalid regex {query!r}: {exc}; pass regex=false to search for the literal text",
        )
    limit = min(max_results, policy.max_search_results)
    matches: list[dict[str, object]] = []
    scanned = skipped = 0
    more = False
    stopped: str | None = None
    slow: _SlowRegex | None = None
    paths, incomplete = list_workspace(files, ".", glob, deadline)
    for path in paths:
        if time.monotonic() > deadline:
            stopped = "the time limit"
            break
        if scanned >= SEARCH_MAX_FILES:
            stopped = f"{SEARCH_MAX_FILES} files"
            break
        data = _searchable(files, path)
        if data is None:
            skipped += 1
            continue
        scanned += 1
        text = data.decode("utf-8", "replace")
        try:
            more = _search_lines(matcher, path, text, deadline, limit, matches)
        except _SlowRegex as exc:
            slow = exc
            break
        except TimeoutError:
            stopped = "the time limit"
            break
        if more:
            break
    if incomplete and stopped is None:
        stopped = f"an incomplete file listing ({incomplete})"
    shown = "\n".join(f"{m['path']}:{m['line']}:{m['text']}" for m in matches)
    capped = truncate(shown, max_bytes=policy.max_output_bytes)
    notes = []
    if more:
        notes.append(f"[more than {limit} matches; showing the first {limit}]")
    if stopped:
        notes.append(f"[search stopped at {stopped}; narrow it with glob=]")
    body = capped.text if matches else f"No matches for {query!r}."
    data_out: dict[str, Any] = {
        "matches": matches,
        "files_scanned": scanned,
        "files_skipped": skipped,
        "truncated": more or stopped is not None or slow is not None,
        "stopped": stopped,
    }
    if slow is not None:
        return ToolResult.error(
            ErrorType.TIMEOUT,
            f"the regex took more than {REGEX_LINE_SECONDS:g}s in one match attempt "
            f"({slow.path}, from line {slow.line}), which means catastrophic backtracking; "
            "simplify it (e.g. avoid nested quantifiers such as (a+)+) or pass regex=false",
            stdout=capped.text if matches else "",
            stdout_truncated=True,
            data=data_out,
        )
    return ToolResult(
        ok=True,
        stdout="\n".join([body, *notes]),
        stdout_truncated=more or stopped is not None or capped.truncated,
        stdout_n_lines=count_lines(shown),
        data=data_out,
    )


def _regex_error() -> type[Exception]:
    return cast(type[Exception], pyregex.error)


def _search_lines(
    matcher: _Matcher,
    path: str,
    text: str,
    deadline: float,
    limit: int,
    matches: list[dict[str, object]],
) -> bool:
    """Append the matching lines of one file; True once there are more than `limit` matches."""
    for number, line in matcher.lines(path, text, deadline):
        if len(matches) >= limit:
            return True
        matches.append(
            {"path": path, "line": number, "text": line.removesuffix("\r")[:SEARCH_LINE_CHARS]}
        )
    return False


def _searchable(files: Files, path: str) -> bytes | None:
    """The file's bytes, or None for binary, huge, unreadable or escaping files."""
    try:
        data = files.read_bytes(path, max_bytes=SEARCH_MAX_FILE_BYTES + 1)
    except SandboxError:
        raise
    except Exception:  # PathEscape, vanished files, directories, FIFOs: skip them
        return None
    if len(data) > SEARCH_MAX_FILE_BYTES or is_binary(data):
        return None
    return data


def _did_you_mean(files: Files, path: str) -> str:
    try:
        names = files.list(".", None, limit=20_000)
    except (OSError, PathEscape):  # only a hint
        return ""
    if len(path) > 1024:
        return ""
    close = difflib.get_close_matches(path, names, n=3, cutoff=0.6)
    return f" (did you mean: {', '.join(close)}?)" if close else ""
