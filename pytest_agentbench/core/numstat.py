"""What a snapshot's one `git diff --binary --numstat -z -p` says (core/git_scripts.py
_DIFF_BODY): the patch and the numstat apart, and the changed paths and lines from the numstat."""

from __future__ import annotations


def split_numstat(data: bytes) -> tuple[bytes, bytes]:
    """(patch, numstat) from git_scripts' one diff: `--numstat -z` records (each ends in a NUL;
    a path holds none), one NUL more, then the patch. ValueError when it is not so."""
    numstat, sep, patch = data.partition(b"\0\0")
    if not sep or not numstat or not patch.startswith(b"diff --git "):
        raise ValueError("no numstat before the patch")
    return patch, numstat + b"\0"


def parse_numstat_z(data: bytes) -> tuple[list[str], int]:
    """Changed paths (sorted, exact) and added + removed lines from `git diff --numstat -z`.

    Each record is `added TAB removed TAB path NUL`; with renames, `added TAB removed TAB NUL
    old NUL new NUL` (both paths are changed). Binary files count no lines (`-`, with or
    without --text)."""
    fields = data.split(b"\0")
    files: set[str] = set()
    lines, i = 0, 0
    while i < len(fields):
        record = fields[i]
        i += 1
        if not record:
            continue
        added, removed, path = (record.split(b"\t", 2) + [b"", b""])[:3]
        lines += sum(int(n) for n in (added, removed) if n.isdigit())
        if path:
            files.add(path.decode("utf-8", "replace"))
        else:
            files.update(p.decode("utf-8", "replace") for p in fields[i : i + 2] if p)
            i += 2
    return sorted(files), lines
