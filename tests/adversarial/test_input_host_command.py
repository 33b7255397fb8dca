"""Issue 8 item 1: a task file must not run commands on the host through git.

`repo.url: "--upload-pack=sh -c '…';true:x"` used to pass `is_url` and reach `git fetch` as an
option. Now the URL is refused when the task loads (one line naming the file and `repo.url`),
again before git runs (repos), every git call puts `--` before URLs and paths, and the protocol
policy is pinned so that no remote helper (`ext::`, `fd::`, `git-remote-<name>`) ever runs.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from pytest_agentbench.repos.gitcmd import GitFailed, RepoError, run_git
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.repos.sources import resolve_source
from pytest_agentbench.tasks.discovery import discover
from tests.support.run_dirs import run_dirs
from tests.support.tiny_pack import SUITE, Pack


def attack_urls(marker: Path) -> dict[str, str]:
    """URLs that each try to create `marker` on the host."""
    return {
        "upload-pack-option": f"--upload-pack=sh -c 'touch {marker}';true:x",
        "upload-pack-option-url": f"--upload-pack=touch {marker} https://example.invalid/r",
        "config-option": f"--config=core.sshCommand=touch {marker}",
        "ext-helper": f"ext::sh -c touch% {marker}",
        "fd-helper": "fd::0",
        "custom-helper": "evil::whatever",
        "ssh-host-option": f"ssh://-oProxyCommand=touch%20{marker}/x",
        "scp-host-option": f"-oProxyCommand=touch {marker}:x",
        "scp-user-option": f"-x@host:path --upload-pack=touch {marker}",
        "unknown-scheme": "evil://host/repo",
    }


def task_text(commit: str, url: str, task_id: str = "evil") -> str:
    return yaml.safe_dump(
        {
            "task_spec_version": 1,
            "id": task_id,
            "suite": SUITE,
            "repo": {"url": url, "commit": commit},
            "validation": {"failing_command": "false", "passing_command": "true"},
        },
        sort_keys=False,
    )


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "src"
    path.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-C", str(path)]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "value.txt").write_text("bad\n")
    subprocess.run([*git, "add", "value.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    commit = subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return path, commit


# --------------------------------------------------------------------------- load time


@pytest.mark.parametrize("name", sorted(attack_urls(Path("/m"))))
def test_attack_url_is_one_problem_line_at_load_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "pwned"
    path = Path("taskpacks", SUITE, "evil", "task.yaml")
    path.parent.mkdir(parents=True)
    path.write_text(task_text("abcdef1", attack_urls(marker)[name]))
    result = discover(Path("taskpacks"), None)
    assert result.tasks == []
    lines = [str(problem) for problem in result.problems]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"taskpacks/{SUITE}/evil/task.yaml: repo.url: "), lines
    assert "\n" not in lines[0]
    assert not marker.exists()


@pytest.mark.parametrize(
    "url",
    [
        "https://example.invalid/r.git",
        "http://example.invalid/r",
        "ssh://git@example.invalid:2222/r.git",
        "git://example.invalid/r.git",
        "file:///srv/r.git",
        "git@example.invalid:org/r.git",
        "example.invalid:r.git",
        "../../_shared/r.bundle",
        "r.bundle",
    ],
)
def test_legitimate_urls_still_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.chdir(tmp_path)
    path = Path("taskpacks", SUITE, "ok", "task.yaml")
    path.parent.mkdir(parents=True)
    path.write_text(task_text("abcdef1", url, "ok"))
    Path("taskpacks", "_shared").mkdir()
    Path("taskpacks", "_shared", "r.bundle").write_text("# v2 git bundle\n")
    Path("taskpacks", SUITE, "ok", "r.bundle").write_text("# v2 git bundle\n")
    result = discover(Path("taskpacks"), None)
    assert [str(p) for p in result.problems] == []
    assert [task.id for task in result.tasks] == ["ok"]


# --------------------------------------------------------------------------- repos, before git


@pytest.mark.parametrize("name", sorted(attack_urls(Path("/m"))))
def test_checkout_refuses_attack_urls_and_runs_nothing(
    tmp_path: Path, repo: tuple[Path, str], name: str
) -> None:
    _, commit = repo
    marker = tmp_path / "pwned"
    url = attack_urls(marker)[name]
    with pytest.raises(RepoError):
        MirrorCache(tmp_path / "cache", git_timeout=30).checkout(url, commit, tmp_path / "ws")
    with pytest.raises(RepoError):
        resolve_source(url, tmp_path)
    assert not marker.exists()


def test_upload_pack_option_in_url_does_not_run_on_the_host(
    tmp_path: Path, repo: tuple[Path, str]
) -> None:
    """The reported exploit, verbatim, through the mirror cache."""
    _, commit = repo
    marker = tmp_path / "pwned"
    url = f"--upload-pack=sh -c 'touch {marker}';true:x"
    with pytest.raises(RepoError):
        MirrorCache(tmp_path / "cache", git_timeout=30).mirror_for(url)
    assert not marker.exists()


def test_protocol_policy_blocks_remote_helpers_on_every_git_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even a URL that slipped past every check cannot start a helper program."""
    marker = tmp_path / "pwned"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    helper = bin_dir / "git-remote-evil"
    helper.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    helper.chmod(helper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "evil:ext:file")  # a hostile environment
    for url in ("evil::x", f"ext::sh -c touch% {marker}"):
        with pytest.raises(GitFailed, match="not allowed"):
            run_git(["ls-remote", "--", url], timeout=30)
    assert not marker.exists()


def test_relative_repository_must_stay_inside_the_taskpacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: tuple[Path, str]
) -> None:
    """`../..` or a symlink out of the taskpacks would hand a host repository to the agent."""
    source, commit = repo
    monkeypatch.chdir(tmp_path)
    task_dir = Path("taskpacks", SUITE, "escape")
    task_dir.mkdir(parents=True)
    (task_dir / "task.yaml").write_text(task_text(commit, "../../../src", "escape"))
    link_dir = Path("taskpacks", SUITE, "linked")
    link_dir.mkdir()
    (link_dir / "repo").symlink_to(source)
    (link_dir / "task.yaml").write_text(task_text(commit, "repo", "linked"))
    shared = Path("taskpacks", "_shared")
    shared.mkdir()
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(shared / "r.git")], check=True)
    (Path("taskpacks", SUITE, "fine")).mkdir()
    Path("taskpacks", SUITE, "fine", "task.yaml").write_text(
        task_text(commit, "../../_shared/r.git", "fine")
    )
    result = discover(Path("taskpacks"), None)
    assert [task.id for task in result.tasks] == ["fine"]
    lines = sorted(str(problem) for problem in result.problems)
    assert len(lines) == 2, lines
    assert all(": repo.url: resolves outside the taskpacks directory" in line for line in lines)
    for url, where in (("../../../src", task_dir), ("repo", link_dir)):
        with pytest.raises(RepoError, match="outside the taskpacks"):
            resolve_source(url, where.resolve())
    assert resolve_source("../../_shared/r.git", Path("taskpacks", SUITE, "fine").resolve())


def test_a_run_with_an_attack_url_records_an_error_and_runs_nothing(
    pytester: pytest.Pytester,
) -> None:
    """Through pytest: the attack task is one ERROR line, the good task still runs."""
    pack = Pack(pytester.path)
    pack.task("good")
    marker = pytester.path / "pwned"
    pack.write("evil", task_text(pack.commit, f"--upload-pack=sh -c 'touch {marker}';true:x"))
    result = pytester.runpytest_inprocess(
        "--agentbench-sandbox", "local", "-p", "no:cacheprovider", "--agentbench-suite", SUITE
    )
    result.assert_outcomes(passed=1, errors=1)
    text = result.stdout.str()
    assert "repo.url: must not start with '-'" in text
    assert "Traceback" not in text
    assert not marker.exists()
    runs = run_dirs(pytester.path / "reports" / "runs")
    records = [json.loads(line) for line in (runs[0] / "attempts.jsonl").read_text().splitlines()]
    by_task = {record["task_id"]: record for record in records}
    assert sorted(by_task) == ["evil", "good"]  # the invalid task has its record, and never ran
    assert by_task["evil"]["result"]["failure_reason"] == "TASK_INVALID"
    assert "repo.url: must not start with '-'" in by_task["evil"]["result"]["summary"]
    assert by_task["evil"]["duration_sec"] == 0.0 and by_task["good"]["result"]["passed"]
