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


def tree_umask(owner_uid: int | None) -> int:
    """The umask a checkout is made with. A tree a root harness hands over to the sandbox uid
    (hand_over) needs nobody else to write: 022, no directory of it is world-writable. Otherwise
    the sandbox may run as a uid the engine maps elsewhere (a rootless engine) or as another user
    than the tree's owner, so the tree stays group/other-writable (0); the private work root
    above it (run/hostenv.work_base, 0700) keeps other users of the host out either way."""
    return 0o022 if handed_over(owner_uid) else 0


def handed_over(owner_uid: int | None) -> bool:
    """Whether hand_over gives the tree to `owner_uid` (we are root and it is another uid)."""
    return owner_uid is not None and os.geteuid() == 0 and owner_uid != 0


def prepare_dest(dest: Path, owner_uid: int | None = None) -> None:
    """Create ``dest``; refuse to reuse a non-empty directory (attempts must not share state)."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise RepoError(f"workspace {dest} already exists and is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    # the sandbox user must be able to add files at the top level (its own once handed over)
    os.chmod(dest, 0o777 & ~tree_umask(owner_uid))


def init_repo(dest: Path, packs: list[Path], timeout: float, owner_uid: int | None = None) -> None:
    """``git init`` in ``dest`` (under tree_umask) and copy in the packs."""
    run_git(["init", "-q", "--template=", "--", str(dest)], timeout=timeout,
            umask=tree_umask(owner_uid))
    git_dir = dest / ".git"
    with (git_dir / "config").open("a") as fh:
        fh.write(f"[user]\n\tname = {GIT_USER[0]}\n\temail = {GIT_USER[1]}\n")
    pack_dir = git_dir / "objects" / "pack"
    pack_dir.mkdir(parents=True, exist_ok=True)
    for src in packs:
        target = pack_dir / src.name
        shutil.copyfile(src, target)
        os.chmod(target, 0o444)  # git treats pack files as immutable


def checkout_detached(dest: Path, commit: str, timeout: float,
                      owner_uid: int | None = None) -> None:
    """Check out ``commit`` (a full sha, never an option) with a detached HEAD, under
    tree_umask."""
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
        umask=tree_umask(owner_uid),
    )


def workspace_git_args(dest: Path) -> list[str]:
    """Explicit git-dir/work-tree so a broken ``.git`` never makes git search parent dirs."""
    return [f"--git-dir={dest / '.git'}", f"--work-tree={dest}", "-c", f"safe.directory={dest}"]


def hand_over(dest: Path, owner_uid: int | None, timeout: float) -> None:
    """Give the tree to ``owner_uid`` (uid:gid) when we are root.

    Without root the tree stays owned by us but is already group/other-writable (tree_umask).
    """
    if not handed_over(owner_uid):
        return
    assert owner_uid is not None
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
