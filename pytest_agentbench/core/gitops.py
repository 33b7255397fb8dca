"""Workspace snapshots and diffs, computed by git *inside* the sandbox.

Never on the host: the agent can write `.git/config` (fsmonitor, filters, pagers), and git run on
the host would execute whatever it put there. A private index in /tmp keeps the agent's own index
untouched, and untracked files are included so created files show up in diffs.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from pytest_agentbench.core.ports import Sandbox, SandboxError

INDEX = "/tmp/.agentbench-index"
EXCLUDES = ["**/__pycache__/**", ".pytest_cache/**", "**/*.pyc", ".agentbench/**"]
APPLY_PATCH = ".git/agentbench-final.patch"
# The agent can write .git/config; pin what would change what we read or write.
_GIT = (
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.quotepath=off"
    " -c core.autocrlf=false -c core.safecrlf=false -c diff.noprefix=false"
    " -c diff.mnemonicPrefix=false -c diff.relative=false -c diff.external="
)
_DIFF = "diff --no-renames --no-ext-diff --no-textconv"


class SnapshotError(SandboxError):
    """git could not read the workspace (e.g. the agent made files unreadable)."""


@dataclass(frozen=True)
class DiffStat:
    patch: str
    files: list[str]
    lines_changed: int


def _pathspec() -> str:
    return " ".join(shlex.quote(f":(exclude){p}") for p in EXCLUDES)


def snapshot_tree(sandbox: Sandbox, timeout_sec: float = 60) -> str:
    """The tree id of the workspace as it is now (tracked + untracked, minus ignored/junk)."""
    # A private index per call: the local sandbox shares the host's /tmp between attempts.
    cmd = (
        f"export GIT_INDEX_FILE=$(mktemp -u {INDEX}.XXXXXXXX); "
        'cp .git/index "$GIT_INDEX_FILE" 2>/dev/null; '
        f"{_GIT} add -A -- . {_pathspec()} && {_GIT} write-tree; "
        'status=$?; rm -f "$GIT_INDEX_FILE"; exit $status'
    )
    result = sandbox.exec(cmd, timeout_sec=timeout_sec)
    if not result.ok:
        raise SnapshotError(f"git snapshot failed: {result.stderr.strip()[-300:]}")
    return result.stdout.strip()


def diff_trees(sandbox: Sandbox, old: str, new: str, timeout_sec: float = 60) -> DiffStat:
    if old == new:
        return DiffStat("", [], 0)
    result = sandbox.exec(
        f"{_GIT} {_DIFF} --binary {old} {new} && echo '@@agentbench-numstat@@' && "
        f"{_GIT} {_DIFF} --numstat --text {old} {new}",
        timeout_sec=timeout_sec,
        full_output=True,
    )
    if not result.ok:
        raise SnapshotError(f"git diff failed: {result.stderr.strip()[-300:]}")
    text = result.full_stdout if result.full_stdout is not None else result.stdout
    patch, _, numstat = text.partition("@@agentbench-numstat@@\n")
    files, lines = [], 0
    for row in numstat.splitlines():
        added, removed, path = (row.split("\t", 2) + ["", ""])[:3]
        files.append(path)
        lines += (int(added) if added.isdigit() else 0) + (int(removed) if removed.isdigit() else 0)
    return DiffStat(patch, sorted(files), lines)


def dirty_tracked_files(sandbox: Sandbox, timeout_sec: float = 60) -> tuple[list[str], str]:
    """Tracked files changed since checkout, and `git diff --stat` (setup must leave none)."""
    result = sandbox.exec(
        f"{_GIT} status --porcelain --untracked-files=no && echo '@@stat@@' && "
        f"{_GIT} diff --stat HEAD",
        timeout_sec=timeout_sec,
    )
    if not result.ok:
        raise SandboxError(f"git status failed: {result.stderr.strip()[-300:]}")
    status, _, stat = result.stdout.partition("@@stat@@\n")
    files = sorted(line[3:] for line in status.splitlines() if line.strip())
    return files, stat.strip()


def untracked_files(sandbox: Sandbox, timeout_sec: float = 60) -> list[str]:
    """Files in the workspace that git does not track, ignored ones included, minus the junk
    that is never part of a snapshot (caches, bytecode)."""
    result = sandbox.exec(
        f"{_GIT} ls-files --others -z -- . {_pathspec()}", timeout_sec=timeout_sec
    )
    if not result.ok:
        raise SnapshotError(f"git ls-files failed: {result.stderr.strip()[-300:]}")
    return sorted(name for name in result.stdout.split("\0") if name)
