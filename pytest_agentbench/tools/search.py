"""The search tool: lines matching a literal text or a regex, over the workspace's text files.

It runs on the host over data the agent controls, so it is bounded: by a file-count and a
file-size cap, the call's deadline (`tool_timeout_sec`) and, for regexes, the `regex` module's
timeout on every match, so a backtracking pattern stops with a TIMEOUT error instead of burning
the host's CPU. The file list comes from list_workspace (tools/read_only.py); a cut result says
what was cut.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, cast

import regex as pyregex

from pytest_agentbench.paths.files import Files
from pytest_agentbench.sandbox.port import SandboxError
from pytest_agentbench.text.truncation import count_lines, truncate
from pytest_agentbench.tools.read_only import is_binary, list_workspace
from pytest_agentbench.tools.results import ErrorType, ToolPolicy, ToolResult

SEARCH_MAX_FILE_BYTES = 2 * 1024 * 1024  # search skips files larger than this
SEARCH_MAX_FILES = 50_000  # search reads at most this many files per call
SEARCH_MAX_QUERY_CHARS = 4096
SEARCH_LINE_CHARS = 300
# One timed regex call (a whole-file scan, or one line) may take this long, at most. The regex
# module counts the process's CPU time, so it bounds the host CPU a pattern burns; on a loaded
# machine the wall time stretches accordingly (the call's deadline is checked between calls).
REGEX_LINE_SECONDS = 2.0


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
    for path, data in _contents(files, paths):
        if time.monotonic() > deadline:
            stopped = "the time limit"
            break
        if scanned >= SEARCH_MAX_FILES:
            stopped = f"{SEARCH_MAX_FILES} files"
            break
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


def _contents(files: Files, paths: list[str]) -> Iterator[tuple[str, bytes | None]]:
    """(path, searchable bytes or None) for each path: through `read_many` when the files are
    across a command boundary (sandbox/docker/container_files.py: a batch per command, not a command
    per file), else one read each."""
    read_many = getattr(files, "read_many", None)
    if read_many is not None:
        for path, data in read_many(paths, SEARCH_MAX_FILE_BYTES + 1):
            yield path, _searchable_bytes(data)
        return
    for path in paths:
        yield path, _searchable(files, path)


def _searchable_bytes(data: bytes | None) -> bytes | None:
    if data is None or len(data) > SEARCH_MAX_FILE_BYTES or is_binary(data):
        return None
    return data


def _searchable(files: Files, path: str) -> bytes | None:
    """The file's bytes, or None for binary, huge, unreadable or escaping files."""
    try:
        data = files.read_bytes(path, max_bytes=SEARCH_MAX_FILE_BYTES + 1)
    except SandboxError:
        raise
    except Exception:  # PathEscape, vanished files, directories, FIFOs: skip them
        return None
    return _searchable_bytes(data)
