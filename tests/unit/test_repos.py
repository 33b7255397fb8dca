"""The repository manager, against real git and real temp repositories (no subprocess mocks)."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_agentbench.repos.gitcmd import RepoError
from pytest_agentbench.repos.mirror import Checkout, MirrorCache
from pytest_agentbench.repos.sources import mirror_key, normalize_url, resolve_source

AUTHOR_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown / setuid)")


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, **AUTHOR_ENV}
    done = subprocess.run(
        ["git", "-c", f"safe.directory={cwd}", *args],
        cwd=cwd, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip()


def commit_file(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    git("add", name, cwd=repo)
    git("commit", "-q", "-m", f"{name}: {text}", cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, list[str]]:
    """A non-bare repo with three commits of app.py: v1, v2, v3."""
    repo = tmp_path / "src"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    shas = [commit_file(repo, "app.py", f"v{i}\n") for i in (1, 2, 3)]
    return repo, shas


@pytest.fixture
def cache(tmp_path: Path) -> MirrorCache:
    return MirrorCache(tmp_path / "cache", git_timeout=60)


def mirrors(cache: MirrorCache) -> list[Path]:
    return sorted(p for p in cache.root.iterdir() if p.name.endswith(".git"))


# --------------------------------------------------------------------------- checkout basics


def test_checkout_old_commit_gives_its_content_and_clean_status(source, cache, tmp_path):
    repo, shas = source
    co = cache.checkout(str(repo), shas[0][:8], tmp_path / "ws")
    assert isinstance(co, Checkout)
    assert co.commit == shas[0]  # abbreviated sha resolved to the full one
    assert co.fetched is True and co.seconds > 0
    assert (co.path / "app.py").read_text() == "v1\n"
    assert git("status", "--porcelain", cwd=co.path) == ""
    assert git("rev-parse", "HEAD", cwd=co.path) == shas[0]
    detached = subprocess.run(["git", "-C", str(co.path), "symbolic-ref", "-q", "HEAD"])
    assert detached.returncode != 0
    assert git("config", "user.email", cwd=co.path)


def test_workspace_holds_no_history_after_the_pinned_commit(source, cache, tmp_path):
    repo, shas = source
    co = cache.checkout(str(repo), shas[1], tmp_path / "ws")
    assert git("log", "--all", "--format=%H", cwd=co.path).split() == [shas[1], shas[0]]
    future = subprocess.run(["git", "-C", str(co.path), "cat-file", "-e", shas[2]])
    assert future.returncode != 0


def test_later_commits_can_be_made_in_the_workspace(source, cache, tmp_path):
    repo, shas = source
    co = cache.checkout(str(repo), shas[0], tmp_path / "ws")
    (co.path / "app.py").write_text("patched\n")
    assert "app.py" in git("diff", "--stat", cwd=co.path)
    git("-c", "user.name=", "commit", "-qam", "agent", cwd=co.path)  # identity comes from config


def test_second_checkout_does_not_fetch(source, cache, tmp_path):
    repo, shas = source
    first = cache.checkout(str(repo), shas[0], tmp_path / "ws1")
    second = cache.checkout(str(repo), shas[0], tmp_path / "ws2")
    third = cache.checkout(str(repo), shas[2], tmp_path / "ws3")  # already in the mirror
    assert (first.fetched, second.fetched, third.fetched) == (True, False, False)
    assert cache.ensure_commit(str(repo), shas[1]) == (first.mirror, False)
    assert (third.path / "app.py").read_text() == "v3\n"


def test_commit_added_upstream_later_triggers_a_fetch(source, cache, tmp_path):
    repo, shas = source
    cache.checkout(str(repo), shas[0], tmp_path / "ws1")
    new = commit_file(repo, "app.py", "v4\n")
    co = cache.checkout(str(repo), new, tmp_path / "ws2")
    assert co.fetched is True
    assert (co.path / "app.py").read_text() == "v4\n"


def test_commit_reachable_from_no_ref_is_fetched_by_sha(source, cache, tmp_path):
    repo, shas = source
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=repo)
    tree = git("rev-parse", f"{shas[0]}^{{tree}}", cwd=repo)
    dangling = git("commit-tree", tree, "-p", shas[2], "-m", "dangling", cwd=repo)
    cache.mirror_for(str(repo))
    co = cache.checkout(str(repo), dangling, tmp_path / "ws")
    assert co.fetched is True and (co.path / "app.py").read_text() == "v1\n"
    pin = f"refs/agentbench/pins/{dangling}"
    assert git("--git-dir", str(co.mirror), "rev-parse", pin, cwd=repo) == dangling


def test_workspace_is_self_contained(source, cache, tmp_path):
    repo, shas = source
    co = cache.checkout(str(repo), shas[2], tmp_path / "ws")
    assert not (co.path / ".git" / "objects" / "info" / "alternates").exists()
    shutil.rmtree(cache.root)
    shutil.rmtree(repo)
    assert git("log", "--format=%H", cwd=co.path).split() == shas[::-1]
    git("fsck", "--no-dangling", cwd=co.path)
    assert git("status", "--porcelain", cwd=co.path) == ""


def test_workspace_dest_must_be_empty(source, cache, tmp_path):
    repo, shas = source
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "leftover").write_text("x")
    with pytest.raises(RepoError, match="not empty"):
        cache.checkout(str(repo), shas[0], dest)


def test_workspace_is_writable_by_group_and_other(source, cache, tmp_path):
    repo, shas = source
    co = cache.checkout(str(repo), shas[0], tmp_path / "ws")
    for path in (co.path, co.path / "app.py", co.path / ".git", co.path / ".git" / "objects"):
        assert path.stat().st_mode & 0o022 == 0o022, path


# --------------------------------------------------------------------------- errors


def test_missing_commit_is_a_clear_one_line_error(source, cache, tmp_path):
    repo, _ = source
    missing = "deadbeef" * 5
    with pytest.raises(RepoError) as info:
        cache.checkout(str(repo), missing, tmp_path / "ws")
    message = str(info.value)
    assert message == f"commit {missing} not found in {repo} (after fetch)"
    assert not list((tmp_path / "ws").iterdir())


def test_unreachable_path_is_a_repo_error(cache, tmp_path):
    url = f"file://{tmp_path}/nowhere/repo.git"
    with pytest.raises(RepoError, match=r"^cannot reach file://.*nowhere/repo.git: .+") as info:
        cache.checkout(url, "abc1234", tmp_path / "ws")
    assert "\n" not in str(info.value)
    assert mirrors(cache) == []  # a failed clone leaves nothing behind
    assert not [p for p in cache.root.iterdir() if ".tmp-" in p.name]


def test_unreachable_url_error_redacts_credentials(cache, tmp_path):
    url = "http://user:s3cret@127.0.0.1:9/repo.git"  # port 9 (discard): connection refused
    expected = r"^cannot reach http://\*\*\*@127\.0\.0\.1:9/repo\.git: "
    with pytest.raises(RepoError, match=expected) as info:
        cache.ensure_commit(url, "abc1234")
    assert "s3cret" not in str(info.value)


def test_git_timeout_is_enforced(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_SSH_COMMAND", "sleep 30;:")  # a server that never answers
    monkeypatch.setenv("GIT_SSH_VARIANT", "simple")
    slow = MirrorCache(cache.root, git_timeout=1)
    with pytest.raises(RepoError, match=r"^cannot reach ssh://example\.invalid/r\.git: timed out"):
        slow.ensure_commit("ssh://example.invalid/r.git", "abc1234")


@pytest.mark.parametrize("bad", ["HEAD", "main", "--upload-pack=touch x", "abc", "g" * 40])
def test_non_sha_commit_is_rejected(source, cache, tmp_path, bad):
    repo, _ = source
    with pytest.raises(RepoError, match="is not a commit sha"):
        cache.checkout(str(repo), bad, tmp_path / "ws")


# --------------------------------------------------------------------------- mirror cache


def test_cache_root_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTBENCH_GIT_CACHE", str(tmp_path / "elsewhere"))
    assert MirrorCache().root == tmp_path / "elsewhere"
    assert MirrorCache(tmp_path / "arg").root == tmp_path / "arg"
    monkeypatch.delenv("AGENTBENCH_GIT_CACHE")
    assert MirrorCache().root == Path.home() / ".cache" / "agentbench" / "git"


def test_mirror_location_and_origin_record(source, cache):
    repo, _ = source
    mirror = cache.mirror_for(str(repo))
    assert mirror == cache.root / f"{mirror_key(str(repo))}.git"
    assert len(mirror.name) == len("0123456789abcdef.git")
    assert git("rev-parse", "--is-bare-repository", cwd=mirror) == "true"
    assert (mirror / "origin.txt").read_text().strip() == str(repo)
    assert cache.mirror_for(f"file://{repo}/") == mirror  # same repo, same mirror


def test_origin_record_redacts_credentials(source, cache, tmp_path, monkeypatch):
    repo, shas = source
    url = "https://bob:s3cret@git.example.invalid/team/app.git"
    config = tmp_path / "gitconfig"
    config.write_text(f'[url "{repo}"]\n\tinsteadOf = {url}\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    co = cache.checkout(url, shas[0], tmp_path / "ws")
    assert (co.mirror / "origin.txt").read_text().strip() == (
        "https://***@git.example.invalid/team/app.git"
    )
    for path in cache.root.rglob("*"):
        if path.is_file():
            assert b"s3cret" not in path.read_bytes(), path


def test_normalized_urls_share_a_key():
    assert normalize_url("HTTPS://u:p@GitHub.com/a/b.git/") == "https://github.com/a/b"
    assert mirror_key("https://github.com/a/b") == mirror_key("https://x:y@github.com/a/b.git")
    assert normalize_url("git@GitHub.com:a/b.git") == "ssh://github.com/a/b"
    assert normalize_url("file:///x/../y/repo.git") == "file:///y/repo.git"
    assert mirror_key("https://github.com/a/b") != mirror_key("https://github.com/a/c")


def test_corrupt_mirror_is_recloned(source, cache, tmp_path):
    repo, shas = source
    first = cache.checkout(str(repo), shas[0], tmp_path / "ws1")
    shutil.rmtree(first.mirror / "objects")
    (first.mirror / "HEAD").write_text("garbage\n")
    co = cache.checkout(str(repo), shas[0], tmp_path / "ws2")
    assert co.fetched is True and (co.path / "app.py").read_text() == "v1\n"


def test_leftover_of_a_crashed_clone_is_ignored(source, cache, tmp_path):
    repo, shas = source
    leftover = cache.root / f"{mirror_key(str(repo))}.git.tmp-crashed"
    (leftover / "objects").mkdir(parents=True)
    co = cache.checkout(str(repo), shas[0], tmp_path / "ws")
    assert (co.path / "app.py").read_text() == "v1\n"
    assert not leftover.exists() and mirrors(cache) == [co.mirror]


def test_only_the_newest_commit_packs_are_kept(source, tmp_path):
    repo, shas = source
    cache = MirrorCache(tmp_path / "cache", pack_keep=2)
    for i, sha in enumerate(shas):
        cache.checkout(str(repo), sha, tmp_path / f"ws{i}")
    commit_packs = cache.root / f"{mirror_key(str(repo))}.packs"
    assert sorted(p.name for p in commit_packs.iterdir()) == sorted(shas[1:])


def _checkout_in_child(root: str, url: str, commit: str, dest: str) -> None:
    co = MirrorCache(Path(root), git_timeout=60).checkout(url, commit, Path(dest))
    if (co.path / "app.py").read_text() != "v2\n":
        raise SystemExit(3)


def test_concurrent_checkouts_share_one_mirror(source, cache, tmp_path):
    repo, shas = source
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(
            target=_checkout_in_child,
            args=(str(cache.root), str(repo), shas[1], str(tmp_path / f"ws{i}")),
        )
        for i in range(4)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
    assert len(mirrors(cache)) == 1
    assert not [p for p in cache.root.iterdir() if ".tmp-" in p.name]
    for i in range(4):
        assert git("status", "--porcelain", cwd=tmp_path / f"ws{i}") == ""


# --------------------------------------------------------------------------- taskpack sources


def test_bundle_inside_a_taskpack(source, cache, tmp_path):
    repo, shas = source
    task_dir = tmp_path / "taskpacks" / "suite" / "task-1"
    (task_dir / "repo").mkdir(parents=True)
    git("bundle", "create", "-q", str(task_dir / "repo" / "app.bundle"), "--all", cwd=repo)
    url = resolve_source("repo/app.bundle", task_dir)
    assert url == str(task_dir / "repo" / "app.bundle")
    co = cache.checkout(url, shas[1], tmp_path / "ws")
    assert (co.path / "app.py").read_text() == "v2\n"
    assert git("status", "--porcelain", cwd=co.path) == ""


def test_bare_repo_inside_a_taskpack(source, cache, tmp_path):
    repo, shas = source
    task_dir = tmp_path / "taskpacks" / "suite" / "task-1"
    task_dir.mkdir(parents=True)
    git("clone", "-q", "--bare", str(repo), str(task_dir.parent / "shared.git"), cwd=tmp_path)
    url = resolve_source("../shared.git", task_dir)
    assert url == str(task_dir.parent / "shared.git")
    co = cache.checkout(url, shas[2], tmp_path / "ws")
    assert (co.path / "app.py").read_text() == "v3\n"


def test_resolve_source_passes_urls_through(tmp_path):
    for url in ("https://github.com/a/b.git", "file:///srv/r.git", "git@github.com:a/b.git"):
        assert resolve_source(url, tmp_path) == url


def test_resolve_source_rejects_missing_paths_and_non_bundles(tmp_path):
    with pytest.raises(RepoError, match=r"'repo\.bundle' not found: .* does not exist"):
        resolve_source("repo.bundle", tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(RepoError, match="not a git bundle"):
        resolve_source("notes.txt", tmp_path)


# --------------------------------------------------------------------------- ownership (root)


def _can_write_as(uid: int, workdir: Path, relpaths: list[str]) -> bool:
    """Fork, become ``uid``, and write each path relative to ``workdir``."""
    pid = os.fork()
    if pid == 0:  # child: chdir first, so 0700 parents (pytest's tmp dirs) do not matter
        code = 1
        try:
            os.chdir(workdir)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            for rel in relpaths:
                with open(rel, "a") as fh:
                    fh.write("x\n")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


@needs_root
def test_workspace_writable_by_sandbox_user_without_chown(source, cache, tmp_path):
    repo, shas = source
    co = cache.checkout(str(repo), shas[0], tmp_path / "ws")
    assert co.path.stat().st_uid == 0
    assert _can_write_as(1000, co.path, ["app.py", "new.txt", ".git/agent-note"])


@needs_root
def test_owner_uid_chowns_the_tree_but_not_symlink_targets(source, cache, tmp_path):
    repo, _ = source
    outside = tmp_path / "host-file"
    outside.write_text("secret")
    (repo / "link").symlink_to(outside)
    git("add", "link", cwd=repo)
    git("commit", "-qm", "link", cwd=repo)
    sha = git("rev-parse", "HEAD", cwd=repo)
    co = cache.checkout(str(repo), sha, tmp_path / "ws", owner_uid=1000)
    owners = {p.lstat().st_uid for p in co.path.rglob("*")} | {co.path.stat().st_uid}
    assert owners == {1000}
    assert outside.stat().st_uid == 0
    assert (co.path / ".git" / "index").stat().st_uid == 1000
    assert git("status", "--porcelain", cwd=co.path) == ""
    assert _can_write_as(1000, co.path, ["app.py", "new.txt"])
