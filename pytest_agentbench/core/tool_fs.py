"""The read-only tools (list_files, read_file, search), host-side over a confined `Files`.

They raise PathEscape / FileNotFoundError / IsADirectoryError for the Toolbox to map to error types;
everything else they report in the ToolResult they return.
"""

from __future__ import annotations

import difflib
import re
import time
from pathlib import PurePosixPath

from pytest_agentbench.core.globs import matches_any
from pytest_agentbench.core.output import count_lines, truncate
from pytest_agentbench.core.patch_parse import normalize_path
from pytest_agentbench.core.ports import Files, PathEscape, SandboxError
from pytest_agentbench.core.tool_results import ErrorType, ToolPolicy, ToolResult

READ_HARD_LIMIT = 32 * 1024 * 1024  # read_file refuses files larger than this outright
SEARCH_MAX_FILE_BYTES = 2 * 1024 * 1024  # search skips files larger than this
SEARCH_LINE_CHARS = 300
BINARY_SNIFF = 8192
_ALL = 10**9


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:BINARY_SNIFF]


def glob_filter(path: str, root: str, glob: str | None) -> bool:
    """A glob without '/' matches file names at any depth ('*.py'); one with '/' matches the path
    relative to `root` or to the workspace ('src/**/test_*.py')."""
    if not glob:
        return True
    if "/" not in glob.strip("/"):
        return matches_any(PurePosixPath(path).name, [glob.strip("/")])
    relative = path[len(root) + 1 :] if root != "." and path.startswith(root + "/") else path
    return matches_any(relative, [glob]) or matches_any(path, [glob])


def list_workspace(files: Files, root: str, glob: str | None) -> list[str]:
    root = "." if root.strip() in ("", ".", "./") else normalize_path(root)
    listed = files.list(root, None, limit=_ALL)  # raises PathEscape for a symlink out
    if root != "." and not listed:
        if not files.exists(root):
            raise FileNotFoundError(f"no such directory: {root}")
        try:
            files.read_bytes(root, max_bytes=0)
        except IsADirectoryError:
            pass
        else:
            raise NotADirectoryError(f"{root} is a file, not a directory; use read_file")
    return [p for p in listed if glob_filter(p, root, glob)]


def list_files(files: Files, policy: ToolPolicy, root: str, glob: str | None) -> ToolResult:
    try:
        found = list_workspace(files, root, glob)
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
    return ToolResult(
        ok=True,
        stdout=text,
        stdout_truncated=len(found) > len(shown),
        stdout_n_lines=len(found),
        data={"files": shown, "count": len(found)},
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
    try:
        pattern = re.compile(query if regex else re.escape(query))
    except re.error as exc:
        return ToolResult.error(
            ErrorType.INVALID_ARGUMENTS,
            f"invalid regex {query!r}: {exc}; pass regex=false to search for the literal text",
        )
    limit = min(max_results, policy.max_search_results)
    matches: list[dict[str, object]] = []
    scanned = skipped = 0
    more = stopped = False
    for path in list_workspace(files, ".", glob):
        if time.monotonic() > deadline:
            stopped = True
            break
        data = _searchable(files, path)
        if data is None:
            skipped += 1
            continue
        scanned += 1
        for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), start=1):
            if pattern.search(line):
                if len(matches) >= limit:
                    more = True
                    break
                matches.append(
                    {
                        "path": path,
                        "line": number,
                        "text": line.removesuffix("\r")[:SEARCH_LINE_CHARS],
                    }
                )
        if more:
            break
    text = "\n".join(f"{m['path']}:{m['line']}:{m['text']}" for m in matches)
    capped = truncate(text, max_bytes=policy.max_output_bytes)
    notes = []
    if more:
        notes.append(f"[more than {limit} matches; showing the first {limit}]")
    if stopped:
        notes.append("[search stopped at the time limit; narrow it with glob=]")
    body = capped.text if matches else f"No matches for {query!r}."
    return ToolResult(
        ok=True,
        stdout="\n".join([body, *notes]),
        stdout_truncated=more or stopped or capped.truncated,
        stdout_n_lines=count_lines(text),
        data={
            "matches": matches,
            "files_scanned": scanned,
            "files_skipped": skipped,
            "truncated": more or stopped,
        },
    )


def _searchable(files: Files, path: str) -> bytes | None:
    """The file's bytes, or None for binary, huge, unreadable or escaping files."""
    try:
        data = files.read_bytes(path, max_bytes=SEARCH_MAX_FILE_BYTES + 1)
    except SandboxError:
        raise
    except Exception:  # PathEscape, vanished files, directories: skip them
        return None
    if len(data) > SEARCH_MAX_FILE_BYTES or is_binary(data):
        return None
    return data


def _did_you_mean(files: Files, path: str) -> str:
    try:
        names = files.list(".", None, limit=20_000)
    except (OSError, PathEscape):  # only a hint
        return ""
    close = difflib.get_close_matches(path, names, n=3, cutoff=0.6)
    return f" (did you mean: {', '.join(close)}?)" if close else ""
