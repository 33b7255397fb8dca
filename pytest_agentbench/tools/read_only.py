"""The read-only tools list_files and read_file (search is tools/search.py), host-side over a
confined `Files`.

They raise PathEscape / FileNotFoundError / IsADirectoryError / NotRegularFile / GlobError for the
Toolbox to map to error types; everything else they report in the ToolResult they return.

Everything here runs on the host over data the agent controls, so everything is bounded: listings
by entry count, depth and the call's deadline (paths/walk.py), globs by a linear-time matcher
(paths/globs.py), reads by a size cap. A cut result says what was cut.
"""

from __future__ import annotations

import difflib
import time

from pytest_agentbench.paths.deadline import current_deadline
from pytest_agentbench.paths.files import Files, PathEscape
from pytest_agentbench.paths.globs import matches_any
from pytest_agentbench.paths.walk import Listing
from pytest_agentbench.tools.patch_parse import normalize_path
from pytest_agentbench.tools.results import ErrorType, ToolPolicy, ToolResult

READ_HARD_LIMIT = 32 * 1024 * 1024  # read_file refuses files larger than this outright
BINARY_SNIFF = 8192
LIST_MAX_FILES = 200_000  # files a listing collects before the glob filter
_CLOCK_EVERY = 1024  # paths between two looks at the clock


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


def _did_you_mean(files: Files, path: str) -> str:
    try:
        names = files.list(".", None, limit=20_000)
    except (OSError, PathEscape):  # only a hint
        return ""
    if len(path) > 1024:
        return ""
    close = difflib.get_close_matches(path, names, n=3, cutoff=0.6)
    return f" (did you mean: {', '.join(close)}?)" if close else ""
