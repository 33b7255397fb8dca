"""Issue 20 item 3: another local user must not decide a live attempt's score.

Before the fix the work root `$TMPDIR/agentbench-work-<uid>` was made with `mkdir -p` (0755, or
whatever a directory another user made first said) and used as found: a directory `nobody`
created first was accepted, a symlink it planted was followed, and the checkout's 0777 top
directory (kept by the pre-agent copy, under 0755 parents) let `nobody` drop a `conftest.py`
into the copy scoring starts from: a no-fix attempt PASSED. Now the work root is created 0700
with mkdir semantics, checked with lstat/fstat (ours, a directory, not a link, not writable by
group/other) or refused in one line, and nothing under it is reachable by another user.

These tests switch to `nobody` (setpriv) and so need root; they use their own sticky TMPDIR so
they never touch the real work root of runs beside them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to act as another user",
)


def as_nobody(script: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         "sh", "-c", script], capture_output=True, text=True, **kw)  # type: ignore[call-overload]


@pytest.fixture
def shared_tmp(monkeypatch: pytest.MonkeyPatch,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh sticky, world-writable TMPDIR (what /tmp is), as this process's tempdir."""
    tmp_path_factory.getbasetemp()  # pytest's own temporary directories stay where they are
    path = Path(tempfile.mkdtemp(prefix="agentbench-shared-", dir="/tmp"))
    path.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    monkeypatch.setenv("TMPDIR", str(path))
    yield path
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


def predictable(shared: Path) -> Path:
    return shared / f"agentbench-work-{os.getuid()}"


def test_item3_a_work_root_another_user_made_first_is_refused(shared_tmp: Path) -> None:
    from pytest_agentbench.run.hostenv import WorkRootError, work_root

    made = as_nobody(f"mkdir -m 777 {predictable(shared_tmp)}")
    assert made.returncode == 0, made.stderr
    with pytest.raises(WorkRootError) as err:
        work_root("run-1")
    message = str(err.value)
    assert str(predictable(shared_tmp)) in message and "owned by uid 65534" in message
    assert "\n" not in message
    assert not (predictable(shared_tmp) / "run-1").exists()


def test_item3_a_symlink_planted_as_the_work_root_is_never_followed(shared_tmp: Path) -> None:
    from pytest_agentbench.run.hostenv import WorkRootError, work_root

    target = shared_tmp / "nobodys"
    made = as_nobody(f"mkdir -m 777 {target} && ln -s {target} {predictable(shared_tmp)}")
    assert made.returncode == 0, made.stderr
    with pytest.raises(WorkRootError, match="symbolic link"):
        work_root("run-1")
    assert list(target.iterdir()) == []  # nothing was created through the link


def test_item3_a_group_or_other_writable_work_root_of_ours_is_refused(shared_tmp: Path) -> None:
    from pytest_agentbench.run.hostenv import WorkRootError, work_root

    predictable(shared_tmp).mkdir()
    predictable(shared_tmp).chmod(0o777)
    with pytest.raises(WorkRootError, match="writable by group or other"):
        work_root("run-1")


def test_item3_the_work_root_is_ours_and_private(shared_tmp: Path) -> None:
    from pytest_agentbench.run.hostenv import work_root

    root = work_root("run-1")
    base = os.lstat(root.parent)
    assert base.st_uid == os.geteuid() and base.st_mode & 0o7777 == 0o700
    root.mkdir(parents=True)
    probe = as_nobody(f"ls {root} || true; : > {root}/x")
    assert probe.returncode != 0 and not (root / "x").exists()


def test_item3_a_plugin_run_refuses_a_foreign_work_root_in_one_line(shared_tmp: Path) -> None:
    made = as_nobody(f"mkdir -m 777 {predictable(shared_tmp)}")
    assert made.returncode == 0, made.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
         "--agentbench-suite", "custom-dev", "--agentbench-sandbox=local",
         "--agentbench-variant=nop", f"--agentbench-out={shared_tmp / 'runs'}",
         "-k", "fix-mean-off-by-one"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")})
    text = proc.stdout + proc.stderr
    assert proc.returncode == 4, text[-3000:]  # pytest's usage error
    assert "Traceback" not in text and "INTERNALERROR" not in text, text[-3000:]
    lines = [line for line in text.splitlines() if "agentbench-work-" in line]
    assert len(lines) == 1 and "owned by uid 65534" in lines[0], text[-3000:]


# The attack of the review: a conftest that turns every failing test into a pass, written by
# another user into every checkout and pre-agent copy it can reach while the attempt runs.
CONFTEST = """import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
"""


@pytest.mark.parametrize("sandbox", ["local", "docker"])
def test_item3_another_user_cannot_write_into_a_live_checkout_or_pre_agent_copy(
    shared_tmp: Path, tmp_path: Path, sandbox: str, request: pytest.FixtureRequest
) -> None:
    if sandbox == "docker":
        request.getfixturevalue("docker_sandboxes")  # skips without Docker (fails under CI)
    packs = tmp_path / "taskpacks"
    shutil.copytree(ROOT / "taskpacks", packs)
    script, variant = tmp_path / "script.yaml", tmp_path / "agent.yaml"
    # the agent does nothing but wait: long enough for the other user to try, many times
    script.write_text(yaml.safe_dump([{"tool": "run", "arguments": {"command": "sleep 8"}}]))
    variant.write_text(yaml.safe_dump({"name": "scripted", "agent": "scripted",
                                       "params": {"script": str(script)}}))
    conftest = shared_tmp / "conftest.src"
    conftest.write_text(CONFTEST)
    conftest.chmod(0o644)
    base = predictable(shared_tmp)
    log = shared_tmp / "attack.log"
    attack = (
        f"end=$(( $(date +%s) + 120 )); while [ $(date +%s) -lt $end ]; do "
        f"for d in {base}/*/*/repo {base}/*/*/pristine {base}/*/*; do "
        f"[ -d \"$d\" ] && cp {conftest} \"$d/conftest.py\" 2>/dev/null "
        f"&& echo \"wrote $d\" >> {log}; done; "
        f"[ -e {shared_tmp}/stop ] && exit 0; sleep 0.05; done")
    attacker = subprocess.Popen(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         "sh", "-c", attack])
    try:
        out = tmp_path / "runs"
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
             "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={packs}",
             f"--agentbench-sandbox={sandbox}", f"--agentbench-out={out}",
             f"--agentbench-variant={variant}", "-k", "fix-mean-off-by-one"],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
            env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")})
    finally:
        (shared_tmp / "stop").touch()
        try:
            attacker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            attacker.kill()
            attacker.wait()
    (run_dir,) = run_dirs(out)
    (line,) = (run_dir / "attempts.jsonl").read_text().splitlines()
    record = json.loads(line)
    wrote = log.read_text() if log.exists() else ""
    assert wrote == "", f"another user wrote into the work root:\n{wrote[:2000]}"
    assert not record["result"]["passed"], record["result"]
    assert record["result"]["failure_reason"] == "TESTS_FAILED", (
        record["result"], proc.stdout[-3000:])


def test_item3_a_handed_over_checkout_and_its_pre_agent_copy_hold_nothing_others_may_write(
    tmp_path: Path,
) -> None:
    """The checkout's top directory was 0777 and git ran under umask 0: every directory of the
    tree, and of the pre-agent copy made from it (cp -a), was world-writable."""
    from pytest_agentbench.paths.trees import copy_tree
    from pytest_agentbench.repos.mirror import MirrorCache
    from pytest_agentbench.run.hostenv import SANDBOX_UID

    repo = tmp_path / "src"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b",
           "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "one"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                         text=True, check=True).stdout.strip()
    co = MirrorCache(tmp_path / "cache", git_timeout=60).checkout(
        str(repo), sha, tmp_path / "ws" / "repo", owner_uid=SANDBOX_UID)
    pristine = tmp_path / "ws" / "pristine"
    copy_tree(co.path, pristine)
    for tree in (co.path, pristine):
        loose = [str(p) for p in [tree, *tree.rglob("*")]
                 if not p.is_symlink() and p.lstat().st_mode & 0o022]
        assert loose == [], loose[:10]
        assert tree.lstat().st_uid == SANDBOX_UID
