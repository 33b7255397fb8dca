"""Issue 8 item 5: a kept workspace must not run the agent's code on the host later.

The workspace an agent leaves behind is built here on the host (what a `run` could make): a `.git`
replaced by a `gitdir:` file pointing at the agent's own git dir with a `core.fsmonitor`, nested
`.git` directories, a planted bare repository, a `.git` symlink, FIFOs, sockets, setuid bits and
symlinks out. `keep_workspace` must copy only what is inert, list what it left out, and never
raise; afterwards `git status` run anywhere inside the copy must find no repository at all (and so
run no fsmonitor). On 4a9ba26 there is no `keep_workspace`: teardown removed `.git` with
`rmtree(ignore_errors=True)`, which leaves a `.git` file or symlink, and moved the rest.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.deep_tree import nest_dirs


def git(cwd: Path, *args: str, ceiling: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(ceiling), "GIT_PAGER": "cat",
           "GIT_CONFIG_NOSYSTEM": "1"}
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(name, None)
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def plant_repo(path: Path, marker: Path, ceiling: Path, *, bare: bool = False) -> None:
    """A git directory whose fsmonitor touches `marker` (what an agent would plant)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    git(path.parent, "init", "-q", *(["--bare"] if bare else []), str(path), ceiling=ceiling)
    gitdir = path if bare else path / ".git"
    hook = f"touch {marker}; false #"
    for key, value in (("core.fsmonitor", hook), ("core.bare", "false")):
        git(gitdir, "config", key, value, ceiling=ceiling)
    if bare:
        git(gitdir, "config", "core.worktree", "..", ceiling=ceiling)


@pytest.fixture
def attacked(tmp_path: Path) -> tuple[Path, Path]:
    """(workspace, marker): a checked-out repo after a hostile agent."""
    ws = tmp_path / "workspace" / "repo"
    ws.mkdir(parents=True)
    marker = tmp_path / "FSMONITOR_RAN"
    git(ws, "init", "-q", ceiling=tmp_path)
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("print('hi')\n")
    (ws / "README.md").write_text("# demo\n")
    # 1. .git replaced by a gitdir: file pointing at the agent's own git dir
    plant_repo(ws / "hidden" / "own", marker, tmp_path)
    os.rename(ws / ".git", ws / "old-git")
    (ws / ".git").write_text(f"gitdir: {ws / 'hidden' / 'own' / '.git'}\n")
    # 2. a nested repository (a submodule-like .git directory) deeper down
    plant_repo(ws / "vendor" / "lib", marker, tmp_path)
    # 3. a bare repository planted as plain directories (HEAD, objects/, refs/, config)
    plant_repo(ws / "docs" / "evil", marker, tmp_path, bare=True)
    # 4. a .git symlink and spellings git takes for .git elsewhere
    (ws / "pkg").mkdir()
    os.symlink(ws / "hidden" / "own" / ".git", ws / "pkg" / ".git")
    (ws / "case").mkdir()
    (ws / "case" / ".GIT").mkdir()
    (ws / "case" / ".git.").write_text("gitdir: /somewhere\n")
    (ws / "case" / "git~1").write_text("gitdir: /somewhere\n")
    # 5. special files, setuid, symlinks in and out
    os.mkfifo(ws / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ws / "sock"))
    sock.close()
    (ws / "tool").write_text("#!/bin/sh\necho hi\n")
    os.chmod(ws / "tool", 0o6777)
    os.symlink("/etc/passwd", ws / "passwd")
    os.symlink("../../../../etc/passwd", ws / "src" / "climb")
    os.symlink("../README.md", ws / "src" / "readme-link")
    os.symlink("app.py", ws / "src" / "app-link")
    os.symlink("sub/..", ws / "src" / "loop-ish")
    # the attack is real: git status in the workspace runs the agent's fsmonitor
    assert git(ws, "status", ceiling=tmp_path).returncode == 0
    assert marker.exists(), "test setup: the planted fsmonitor did not run"
    marker.unlink()
    return ws, marker


def every_dir(root: Path) -> list[Path]:
    out = [root]
    for dirpath, dirnames, _ in os.walk(root):
        out += [Path(dirpath) / d for d in dirnames]
    return out


def test_item5_git_status_inside_a_kept_workspace_finds_no_planted_repository(
        attacked: tuple[Path, Path], tmp_path: Path) -> None:
    from pytest_agentbench.core.keep import keep_workspace

    ws, marker = attacked
    dest = tmp_path / "run" / "tasks" / "t" / "repo"
    report = keep_workspace(ws, dest)
    assert report.files >= 4 and report.dirs >= 3
    for directory in every_dir(dest):
        found = git(directory, "rev-parse", "--git-dir", ceiling=tmp_path)
        assert found.returncode != 0, f"{directory} is inside a repository: {found.stdout}"
        git(directory, "status", ceiling=tmp_path)
        assert not marker.exists(), f"git status in {directory} ran the agent's fsmonitor"
    names = {p.name for p in dest.rglob("*")}
    assert not names & {".git", ".GIT", ".git.", "git~1"}
    assert not (dest / "docs" / "evil" / "HEAD").exists()
    assert (dest / "docs" / "evil" / "config").exists()  # inert without a HEAD
    skipped = {s["path"]: s["reason"] for s in report.skipped}
    for path in (".git", "vendor/lib/.git", "pkg/.git", "case/.GIT", "case/.git.",
                 "case/git~1", "hidden/own/.git", "docs/evil/HEAD"):
        assert path in skipped, (path, skipped)


def test_item5_only_inert_entries_are_kept_and_the_rest_listed(
        attacked: tuple[Path, Path], tmp_path: Path) -> None:
    from pytest_agentbench.core.keep import keep_workspace

    ws, _ = attacked
    dest = tmp_path / "kept"
    report = keep_workspace(ws, dest)
    skipped = {s["path"]: s["reason"] for s in report.skipped}
    assert "FIFO" in skipped["pipe"] and "socket" in skipped["sock"]
    assert "outside" in skipped["passwd"] and "outside" in skipped["src/climb"]
    assert not (dest / "pipe").exists() and not (dest / "sock").exists()
    assert not os.path.lexists(dest / "passwd") and not os.path.lexists(dest / "src" / "climb")
    assert os.readlink(dest / "src" / "readme-link") == "../README.md"
    assert (dest / "src" / "app-link").read_text() == "print('hi')\n"
    assert (dest / "src" / "app.py").read_text() == "print('hi')\n"
    mode = stat.S_IMODE(os.stat(dest / "tool").st_mode)
    assert mode == 0o755, oct(mode)  # no setuid/setgid, no group/other write
    assert report.skipped_count == len(report.skipped)
    assert report.to_dict()["dest"] == str(dest)


def test_item5_a_fifo_on_another_file_system_does_not_lose_the_record(tmp_path: Path) -> None:
    """shutil.move across file systems raised on a FIFO and the attempt's record was lost."""
    from pytest_agentbench.core.keep import keep_workspace

    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system at /dev/shm")
    ws = tmp_path / "repo"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    os.mkfifo(ws / "pipe")
    dest_parent = Path(os.environ.get("AGENTBENCH_TEST_SHM", shm)) / f"keep-{os.getpid()}"
    try:
        report = keep_workspace(ws, dest_parent / "repo")
        assert report.files == 1 and (dest_parent / "repo" / "a.txt").read_text() == "a\n"
        assert [s["path"] for s in report.skipped] == ["pipe"]
    finally:
        subprocess.run(["rm", "-rf", str(dest_parent)], check=False)


def test_item5_keep_never_raises_and_bounds_bytes(tmp_path: Path) -> None:
    from pytest_agentbench.core.keep import keep_workspace

    ws = tmp_path / "repo"
    ws.mkdir()
    (ws / "small").write_bytes(b"x" * 10)
    (ws / "big").write_bytes(b"y" * 5000)
    report = keep_workspace(ws, tmp_path / "dest", max_bytes=1000)
    assert report.bytes == 10 and not (tmp_path / "dest" / "big").exists()
    assert "byte budget" in {s["path"]: s["reason"] for s in report.skipped}["big"]
    # a missing workspace, an existing destination: notes, not exceptions
    missing = keep_workspace(tmp_path / "nope", tmp_path / "dest2")
    assert not missing.ok and missing.notes
    again = keep_workspace(ws, tmp_path / "dest")
    assert not again.ok and "already exists" in again.notes[0]


def test_item5_deep_nesting_and_many_entries_are_bounded(tmp_path: Path) -> None:
    from pytest_agentbench.core.keep import keep_workspace

    ws = tmp_path / "repo"
    ws.mkdir()
    nest_dirs(ws, 400)  # deeper than any path the kernel resolves in one go
    for i in range(50):
        (ws / f"f{i}").write_text("x")
    report = keep_workspace(ws, tmp_path / "dest", max_entries=30)
    assert not report.ok and any("stopped after 30 entries" in n for n in report.notes)
    deep = keep_workspace(ws, tmp_path / "dest2")
    assert not deep.ok and any("directory levels" in n for n in deep.notes)
    assert deep.files == 50
