"""Per-attempt workspaces: a self-contained repository checked out at one commit.

The workspace is bind-mounted into a container where the host cache does not exist, so it
gets its own copy of the objects (no alternates), and only the pinned commit's history: a
later fix commit must never be reachable from inside the sandbox (``git log --all``).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from pytest_agentbench.paths.trees import chown_tree
from pytest_agentbench.repos.gitcmd import RepoError, run_git

GIT_USER = ("agentbench", "agentbench@localhost")
_FULL_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def prepare_dest(dest: Path) -> None:
    """Create ``dest``; refuse to reuse a non-empty directory (attempts must not share state)."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise RepoError(f"workspace {dest} already exists and is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    os.chmod(dest, 0o777)  # the sandbox user must be able to add files at the top level


def init_repo(dest: Path, packs: list[Path], timeout: float) -> None:
    """``git init`` in ``dest`` (umask 0: group/other may write) and copy in the packs."""
    run_git(["init", "-q", "--template=", "--", str(dest)], timeout=timeout, umask=0)
    git_dir = dest / ".git"
    with (git_dir / "config").open("a") as fh:
        fh.write(f"[user]\n\tname = {GIT_USER[0]}\n\temail = {GIT_USER[1]}\n")
    pack_dir = git_dir / "objects" / "pack"
    pack_dir.mkdir(parents=True, exist_ok=True)
    for src in packs:
        target = pack_dir / src.name
        shutil.copyfile(src, target)
        os.chmod(target, 0o444)  # git treats pack files as immutable


def checkout_detached(dest: Path, commit: str, timeout: float) -> None:
    """Check out ``commit`` (a full sha, never an option) with a detached HEAD; files are
    created world-writable."""
    if not _FULL_SHA.match(commit):
        raise RepoError(f"{commit!r} is not a full commit sha")
    run_git(
        [
            *workspace_git_args(dest),
            "-c",
            "advice.detachedHead=false",
            "-c",
            "checkout.workers=0",
            "checkout",
            "-q",
            "--detach",
            commit,
        ],
        timeout=timeout,
        umask=0,
    )


def workspace_git_args(dest: Path) -> list[str]:
    """Explicit git-dir/work-tree so a broken ``.git`` never makes git search parent dirs."""
    return [f"--git-dir={dest / '.git'}", f"--work-tree={dest}", "-c", f"safe.directory={dest}"]


def hand_over(dest: Path, owner_uid: int | None, timeout: float) -> None:
    """Give the tree to ``owner_uid`` (uid:gid) when we are root.

    Without root the tree stays owned by us but is already group/other-writable (umask 0).
    """
    if owner_uid is None or owner_uid == os.geteuid() or os.geteuid() != 0:
        return
    chown_tree(dest, owner_uid, owner_uid)
    # chown changed every ctime; refresh the index so the first `git status` stays cheap.
    run_git([*workspace_git_args(dest), "update-index", "-q", "--refresh"], timeout=timeout)
    os.chown(dest / ".git" / "index", owner_uid, owner_uid)


def clear_dir(dest: Path) -> None:
    """Remove whatever a failed checkout left in ``dest``, keeping ``dest`` itself."""
    for entry in list(dest.iterdir()) if dest.is_dir() else []:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
