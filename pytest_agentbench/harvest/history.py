"""A repository's first-parent history, read with git from a bare mirror on the host.

Every commit on the first-parent line is one change: its diff against its first parent (so a
merge commit's change is what the merge brought to the main line, and a squash merge is an
ordinary commit). Renames are not detected: a renamed file is a deletion and an addition, which
a patch applies exactly. Nothing here runs the repository's code; git reads only the mirror the
harness made (its config is ours).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from pytest_agentbench.repos.gitcmd import GitFailed, git_env, run_git, stderr_summary

GIT_TIMEOUT_SEC = 120.0
_FIELD, _RECORD = "\x1f", "\x1e"


@dataclass(frozen=True)
class Commit:
    sha: str
    parents: tuple[str, ...]
    author: str  # "name <email>"
    date: str  # committer date, strict ISO 8601
    subject: str
    body: str


@dataclass(frozen=True)
class FileChange:
    path: str
    status: str  # A, M, D, T (type change)
    added: int | None  # lines; None for a binary file
    removed: int | None


def first_parent_commits(mirror: Path, rev_range: str, max_commits: int | None) -> list[Commit]:
    """Newest first, as `git log --first-parent` lists them."""
    fmt = _FIELD.join(["%H", "%P", "%an <%ae>", "%cI", "%s", "%b"]) + _RECORD
    args = ["--git-dir", str(mirror), "log", "--first-parent", f"--format={fmt}"]
    if max_commits is not None:
        args.append(f"--max-count={max_commits}")
    out = run_git([*args, rev_range, "--"], timeout=GIT_TIMEOUT_SEC)
    commits = []
    for record in out.split(_RECORD):
        fields = record.strip("\n").split(_FIELD)
        if len(fields) != 6:
            continue
        sha, parents, author, date, subject, body = fields
        commits.append(Commit(sha, tuple(parents.split()), author, date, subject, body.strip()))
    return commits


def changes(mirror: Path, parent: str, commit: str) -> list[FileChange]:
    """The files `commit` changed against `parent`, with line counts."""
    base = ["--git-dir", str(mirror), "diff", "--no-renames", "--no-ext-diff", "-z"]
    status = run_git([*base, "--name-status", parent, commit, "--"], timeout=GIT_TIMEOUT_SEC)
    numstat = run_git([*base, "--numstat", parent, commit, "--"], timeout=GIT_TIMEOUT_SEC)
    counts: dict[str, tuple[int | None, int | None]] = {}
    for record in numstat.split("\0"):
        parts = record.split("\t", 2)
        if len(parts) == 3:
            counts[parts[2]] = (_int(parts[0]), _int(parts[1]))
    fields = status.split("\0")
    out = []
    for i in range(0, len(fields) - 1, 2):
        kind, path = fields[i], fields[i + 1]
        added, removed = counts.get(path, (None, None))
        out.append(FileChange(path, kind[:1], added, removed))
    return out


def patch(mirror: Path, parent: str, commit: str, paths: list[str]) -> bytes:
    """The exact patch (binary files included) of `paths` from `parent` to `commit`."""
    if not paths:
        return b""
    return _git_bytes(mirror, "-c", "core.quotePath=true", "diff", "--binary", "--full-index",
                      "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color", parent,
                      commit, "--", *[f":(literal){p}" for p in paths])


def files_at(mirror: Path, commit: str) -> list[str]:
    out = run_git(["--git-dir", str(mirror), "ls-tree", "-r", "-z", "--name-only", commit],
                  timeout=GIT_TIMEOUT_SEC)
    return [p for p in out.split("\0") if p]


def read_at(mirror: Path, commit: str, path: str, limit: int = 1 << 20) -> bytes | None:
    """A file's content at `commit` (None if absent or larger than `limit`)."""
    try:
        data = _git_bytes(mirror, "cat-file", "blob", f"{commit}:{path}")
    except GitFailed:
        return None
    return data if len(data) <= limit else None


def _git_bytes(mirror: Path, *args: str) -> bytes:
    """git's stdout as bytes (a patch or a file need not be UTF-8)."""
    cmd = ["git", "--git-dir", str(mirror), *args]
    try:
        done = subprocess.run(cmd, capture_output=True, env=git_env(), timeout=GIT_TIMEOUT_SEC,
                              check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise GitFailed(args, -1, f"timed out after {GIT_TIMEOUT_SEC:g}s") from None
    if done.returncode != 0:
        raise GitFailed(args, done.returncode,
                        stderr_summary(done.stderr.decode("utf-8", "replace")))
    return done.stdout


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None
