"""Bare mirror cache and fast, self-contained checkouts of pinned commits.

Layout under the cache root (default ``~/.cache/agentbench/git``, env ``AGENTBENCH_GIT_CACHE``)::

    <key>.git/             bare mirror of one URL (key = sha256(normalized url)[:16])
    <key>.git/origin.txt   the URL it mirrors, credentials redacted
    <key>.lock             flock: shared to read, exclusive to create/fetch/repair
    <key>.packs/<sha>/ pack of one commit's history, copied into workspaces

The URL (which may carry credentials) is never written into the mirror's git config: every
fetch is given the caller's URL explicitly, after ``--`` (a URL is never read as an option), and
only over the transports that ``gitcmd`` allows.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import pytest_agentbench.repos.commit_packs as commit_packs
import pytest_agentbench.repos.workspace as workspace
from pytest_agentbench.repos.gitcmd import GitFailed, RepoError, redact, run_git
from pytest_agentbench.repos.locks import file_lock
from pytest_agentbench.repos.sources import check_git_source, mirror_key

CACHE_ENV = "AGENTBENCH_GIT_CACHE"
_SHA = re.compile(r"^[0-9a-fA-F]{4,64}$")
_PIN_PREFIX = "refs/agentbench/pins/"


@dataclass
class Checkout:
    """A prepared workspace: ``commit`` is the full sha; ``fetched`` says whether the network
    (or the source path) was touched, i.e. the mirror was cloned or fetched."""

    path: Path
    commit: str
    mirror: Path
    fetched: bool
    seconds: float


class _MirrorCorrupt(Exception):
    """git failed on the mirror itself; the cure is to re-clone it (once)."""


def default_root() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "agentbench" / "git"


class MirrorCache:
    """One bare mirror per repository URL, safe to share between processes."""

    def __init__(
        self, root: Path | None = None, git_timeout: float = 300.0, pack_keep: int = 16
    ) -> None:
        root_dir = Path(root).expanduser() if root is not None else default_root()
        self.root = root_dir.absolute()  # every path given to git starts with '/'

        self.git_timeout = git_timeout
        self.lock_timeout = 3 * git_timeout  # a holder runs a few git commands at most
        self.pack_keep = pack_keep

    # ----------------------------------------------------------------- public API

    def mirror_for(self, url: str, refresh: bool = False) -> Path:
        """Create the mirror for ``url`` if needed (repairing a corrupt one); returns its path.

        Existing mirrors are only fetched with ``refresh=True``: normally fetching is left
        to :meth:`ensure_commit`, which does it only when a pinned commit is missing.
        """
        check_git_source(url)
        mirror = self._mirror_path(url)
        with self._lock(url, shared=False):
            for attempt in (0, 1):
                try:
                    fetched = self._create_if_missing(url, mirror)
                    self._check_usable(mirror)
                    if refresh and not fetched:
                        self._fetch_refs(url, mirror)
                    return mirror
                except _MirrorCorrupt as exc:
                    self._give_up_or_remove(url, mirror, attempt, exc)
        raise AssertionError("unreachable")

    def ensure_commit(self, url: str, commit: str) -> tuple[Path, bool]:
        """Make sure ``commit`` is in the mirror; returns (mirror path, fetched?)."""
        mirror, fetched, _ = self._ensure(url, commit)
        return mirror, fetched

    def resolve(self, url: str, commit: str) -> str:
        """The full sha of ``commit`` (fetched into the mirror if it is not there yet)."""
        return self._ensure(url, commit)[2]

    def checkout(self, url: str, commit: str, dest: Path, owner_uid: int | None = None) -> Checkout:
        """Fresh workspace at ``dest``: detached HEAD at ``commit``, clean status, no
        alternates, holding only that commit's history; owned by ``owner_uid`` when root
        (nothing group/other-writable), otherwise group/other-writable."""
        started = time.monotonic()
        check_git_source(url)
        dest = Path(dest).absolute()
        workspace.prepare_dest(dest, owner_uid)
        mirror, fetched, full = self._ensure(url, commit)
        try:
            self._populate(url, mirror, full, dest, owner_uid)
            workspace.checkout_detached(dest, full, self.git_timeout, owner_uid)
            workspace.hand_over(dest, owner_uid, self.git_timeout)
        except RepoError as exc:
            workspace.clear_dir(dest)
            raise RepoError(f"cannot check out {full[:12]} into {dest}: {exc}") from None
        return Checkout(dest, full, mirror, fetched, time.monotonic() - started)

    # ----------------------------------------------------------------- commits

    def _ensure(self, url: str, commit: str) -> tuple[Path, bool, str]:
        """(mirror, fetched?, full sha). Fast path under a shared lock, fetch under exclusive."""
        check_git_source(url)
        if not _SHA.match(commit):
            raise RepoError(f"{commit!r} is not a commit sha (expected 4-64 hex digits)")
        commit = commit.lower()
        mirror = self._mirror_path(url)
        with self._lock(url, shared=True):
            full = self._try_resolve(mirror, commit) if mirror.is_dir() else None
        if full:
            return mirror, False, full
        with self._lock(url, shared=False):
            for attempt in (0, 1):
                try:
                    fetched, full = self._fetch_commit(url, mirror, commit)
                    return mirror, fetched, full
                except _MirrorCorrupt as exc:
                    self._give_up_or_remove(url, mirror, attempt, exc)
        raise AssertionError("unreachable")

    def _fetch_commit(self, url: str, mirror: Path, commit: str) -> tuple[bool, str]:
        """Under the exclusive lock: clone/fetch until ``commit`` is present."""
        fetched = self._create_if_missing(url, mirror)
        full = self._resolve(mirror, commit)
        if full is None and not fetched:
            self._fetch_refs(url, mirror)
            fetched = True
            full = self._resolve(mirror, commit)
        if full is None and len(commit) in (40, 64):
            fetched = self._fetch_sha(url, mirror, commit) or fetched
            full = self._resolve(mirror, commit)
        if full is None:
            raise RepoError(f"commit {commit} not found in {redact(url)} (after fetch)")
        return fetched, full

    def _resolve(self, mirror: Path, commit: str) -> str | None:
        """Full sha of ``commit`` in the mirror, None when missing (or ambiguous)."""
        try:
            out = self._git(mirror, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
        except GitFailed as exc:
            if exc.returncode == 1:
                return None
            raise _MirrorCorrupt(exc.summary) from None
        return out.strip()

    def _try_resolve(self, mirror: Path, commit: str) -> str | None:
        try:
            return self._resolve(mirror, commit)
        except _MirrorCorrupt:
            return None  # repaired under the exclusive lock

    # ----------------------------------------------------------------- mirror upkeep

    def _create_if_missing(self, url: str, mirror: Path) -> bool:
        """Clone into a temp dir beside the mirror, then rename: never a half mirror."""
        if mirror.is_dir():
            return False
        for stale in self.root.glob(f"{mirror.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)  # a crashed clone; we hold the lock
        tmp = mirror.with_name(f"{mirror.name}.tmp-{uuid.uuid4().hex[:8]}")
        try:
            run_git(
                ["init", "-q", "--bare", "--template=", "--", str(tmp)], timeout=self.git_timeout
            )
            # Never auto-gc: objects of a pinned commit must survive upstream force-pushes.
            self._git(tmp, "config", "gc.auto", "0")
            (tmp / "origin.txt").write_text(redact(url.strip()) + "\n")
            self._fetch_refs(url, tmp)
            os.rename(tmp, mirror)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return True

    def _fetch_refs(self, url: str, mirror: Path) -> None:
        """Fetch every ref (no pruning: refs we already hold keep their commits alive)."""
        try:
            self._git(
                mirror, "fetch", "-q", "--no-write-fetch-head", "--", url, "+refs/*:refs/*"
            )
        except GitFailed as exc:
            self._check_usable(mirror)
            raise RepoError(f"cannot reach {redact(url)}: {exc.summary}") from None

    def _fetch_sha(self, url: str, mirror: Path, sha: str) -> bool:
        """Ask for the sha itself (servers that allow it); pin it with a ref. False if refused."""
        try:
            self._git(
                mirror,
                "fetch",
                "-q",
                "--no-write-fetch-head",
                "--",
                url,
                f"{sha}:{_PIN_PREFIX}{sha}",
            )
        except GitFailed:
            self._check_usable(mirror)
            return False
        return True

    def _check_usable(self, mirror: Path) -> None:
        """Raise _MirrorCorrupt when git cannot even read the mirror."""
        try:
            self._git(mirror, "rev-parse", "--verify", "--quiet", "HEAD^{tree}")
        except GitFailed as exc:
            if exc.returncode != 1:  # 1 = unborn HEAD, which a mirror may well have
                raise _MirrorCorrupt(exc.summary) from None

    def _give_up_or_remove(self, url: str, mirror: Path, attempt: int, exc: Exception) -> None:
        if attempt:
            raise RepoError(
                f"git mirror {mirror} of {redact(url)} is unusable even after re-cloning: {exc}"
            ) from None
        shutil.rmtree(mirror, ignore_errors=True)
        shutil.rmtree(self._packs_root(url), ignore_errors=True)

    # ----------------------------------------------------------------- workspaces

    def _populate(self, url: str, mirror: Path, full: str, dest: Path,
                  owner_uid: int | None = None) -> None:
        """git init ``dest`` and copy in the commit's commit pack (building it if needed)."""
        pack = self._packs_root(url) / full
        with self._lock(url, shared=True):
            packs = commit_packs.commit_pack_files(pack)
            if packs:
                commit_packs.touch(pack)
                workspace.init_repo(dest, packs, self.git_timeout, owner_uid)
                return
        with self._lock(url, shared=False):
            if not commit_packs.commit_pack_files(pack):
                self._build_commit_pack(url, mirror, full, pack)
            workspace.init_repo(dest, commit_packs.commit_pack_files(pack), self.git_timeout,
                               owner_uid)

    def _build_commit_pack(self, url: str, mirror: Path, full: str, pack: Path) -> None:
        """Under the exclusive lock. pack-objects failing means a broken mirror: re-clone once."""
        for attempt in (0, 1):
            try:
                shutil.rmtree(pack, ignore_errors=True)
                commit_packs.build_commit_pack(mirror, full, pack, self.git_timeout)
                commit_packs.evict(pack.parent, self.pack_keep)
                return
            except GitFailed as exc:
                self._give_up_or_remove(url, mirror, attempt, exc)
                self._fetch_commit(url, mirror, full)

    # ----------------------------------------------------------------- helpers

    def _mirror_path(self, url: str) -> Path:
        return self.root / f"{mirror_key(url)}.git"

    def _packs_root(self, url: str) -> Path:
        return self.root / f"{mirror_key(url)}.packs"

    def _lock(self, url: str, *, shared: bool) -> AbstractContextManager[None]:
        return file_lock(
            self.root / f"{mirror_key(url)}.lock", shared=shared, timeout=self.lock_timeout
        )

    def _git(self, git_dir: Path, *args: str) -> str:
        return run_git([f"--git-dir={git_dir}", *args], timeout=self.git_timeout)
