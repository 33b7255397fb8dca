"""Issue 10: what setup leaves in the workspace and in /env is cached, and what an agent does to
either never reaches the next attempt.

Three Docker attempts of one task share an env cache. Setup builds an ignored `.venv`-like tree
and an untracked build output in the workspace and a file in /env. The first attempt builds the
entry; its agent then tries to poison everything setup left (host-side file tools, commands in
the container, a hard link, /env). The second attempt is a cache hit: its agent must see the
entry exactly as setup left it, and so must scoring's pristine copy; the entry on disk is
unchanged byte for byte. The third shows the restore is a view (overlay) where this host allows.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_agentbench.agents.port import AgentContext, AgentOutcome
from pytest_agentbench.core.envcache import EnvCache
from pytest_agentbench.core.pipeline import AttemptPipeline
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.run.hostenv import owner_uid
from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE
from pytest_agentbench.tasks.loader import load_task
from tests.support.attempts import attempt_config

ROOT = Path(__file__).resolve().parents[2]
TASK = "fix-mean-off-by-one"
SETUP = [
    "mkdir -p .venv/lib build && echo original > .venv/lib/mod.py && echo built > build/out.so",
    "echo '*' > .venv/.gitignore && echo '*' > build/.gitignore",  # ignored, as venv does
    "echo env-original > /env/marker",
]
PROBE = "cat .venv/lib/mod.py build/out.so /env/marker; ls .venv/lib"
POISON = ("echo poisoned > .venv/lib/mod.py; echo poisoned > .venv/lib/extra.py; "
          "rm -f build/out.so; ln .venv/lib/mod.py .venv/lib/link.py; "
          "echo poisoned >> /env/marker; echo poisoned > /env/new")


class Probe:
    """Reads what setup left; with `poison`, then tries to change all of it."""

    name = "probe"

    def __init__(self, poison: bool) -> None:
        self.poison = poison
        self.seen = ""
        self.seen_result: dict[str, Any] = {}  # the whole result, for a failure's message
        self.poison_result: dict[str, Any] = {}

    def run(self, ctx: AgentContext) -> AgentOutcome:
        self.seen_result = ctx.toolbox.call("run", {"command": PROBE}).to_dict()
        self.seen = self.seen_result["stdout"]
        if self.poison:
            ctx.toolbox.call("write_file", {"path": "build/host-side.txt", "content": "x\n"})
            ctx.toolbox.call("write_file", {"path": ".venv/lib/mod.py", "content": "host\n"})
            self.poison_result = ctx.toolbox.call("run", {"command": POISON}).to_dict()
        return AgentOutcome("finish")


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        digest.update(f"{path.relative_to(root)} {info.st_mode} {info.st_size}\n".encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    packs = tmp_path / "taskpacks"
    shutil.copytree(ROOT / "taskpacks", packs)
    path = packs / "custom-dev" / TASK / "task.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["setup"] = {"commands": SETUP}
    path.write_text(yaml.safe_dump(spec))
    return path


def attempt(tmp_path: Path, task_file: Path, docker_sandboxes: Any, index: int,
            agent: Probe) -> dict[str, Any]:
    run_dir = tmp_path / "run"
    cfg = attempt_config(tmp_path, "envcache", run_dir=run_dir, attempt_index=index,
                         attempt_label=f"attempt{index + 1}", image=DEFAULT_IMAGE,
                         owner_uid=owner_uid("docker"), env_cache=EnvCache(tmp_path / "env-cache"))
    pipeline = AttemptPipeline(load_task(task_file), cfg, docker_sandboxes,
                               MirrorCache(tmp_path / "git"), agent)
    return pipeline.run().to_json_dict()


def environment(tmp_path: Path, index: int) -> dict[str, Any]:
    path = tmp_path / "run" / "tasks" / TASK / f"attempt{index + 1}" / "meta" / "environment.json"
    return dict(yaml.safe_load(path.read_text()))


def test_an_agent_cannot_alter_the_cached_environment(
    tmp_path: Path, task_file: Path, docker_sandboxes: Any
) -> None:
    first = Probe(poison=True)
    built = attempt(tmp_path, task_file, docker_sandboxes, 0, first)
    assert built["setup"]["env_cache"] == "built", built["result"]
    assert first.seen.split() == ["original", "built", "env-original", "mod.py"], first.seen_result
    assert "Read-only file system" in first.poison_result["stderr"], first.poison_result
    (entry,) = [p for p in (tmp_path / "env-cache").iterdir() if not p.name.startswith(".")]
    before = tree_digest(entry / "repo"), tree_digest(entry / "env")

    second = Probe(poison=False)
    hit = attempt(tmp_path, task_file, docker_sandboxes, 1, second)
    assert hit["setup"]["env_cache"] == "hit" and hit["setup"]["reused_snapshot"]
    assert second.seen.split() == ["original", "built", "env-original", "mod.py"], \
        second.seen_result
    assert (tree_digest(entry / "repo"), tree_digest(entry / "env")) == before
    for record in (built, hit):  # both reached scoring: the nop-like agent left the bug
        assert record["result"]["failure_reason"] == "TESTS_FAILED", record["result"]

    env = environment(tmp_path, 1)["env_cache"]
    loopfs_ok = os.geteuid() == 0 and Path("/dev/loop-control").exists()
    assert env["restore"] == ("overlay" if loopfs_ok else "copy"), env
    assert env["restore_sec"] < 1.0, env
    assert not list((tmp_path / "work").iterdir()), "a workspace or its layer was left behind"


@pytest.mark.parametrize("how", ["overlay", "copy", "local"])
def test_a_view_of_an_entry_is_writable_and_never_writes_through(
    tmp_path: Path, docker_sandboxes: Any, how: str
) -> None:
    """SandboxFactory.provision_from, each way it can be made: the view starts with the base's
    content and owner, takes writes, deletions and a hard link, and the base never changes; the
    view is gone after release."""
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory
    from pytest_agentbench.sandbox.local import LocalSandboxFactory

    if how == "overlay" and docker_sandboxes.loopfs_problem() is not None:
        pytest.skip(f"no overlay here: {docker_sandboxes.loopfs_problem()}")
    factory: Any = LocalSandboxFactory() if how == "local" else DockerSandboxFactory(
        docker_sandboxes.client)
    if how == "copy":
        factory._loopfs_problem = "forced by the test"
    base = tmp_path / "entry"
    (base / "pkg").mkdir(parents=True)
    (base / "pkg" / "mod.py").write_text("original\n")
    (base / "gone.txt").write_text("x\n")
    before = tree_digest(base)
    view = tmp_path / "attempt" / "repo"
    view.parent.mkdir()
    mode, made = factory.provision_from(view, 64, base)
    assert made == ("overlay" if how == "overlay" else "copy")
    assert (view / "pkg" / "mod.py").read_text() == "original\n"
    assert view.stat().st_uid == base.stat().st_uid
    with (view / "pkg" / "mod.py").open("a") as handle:
        handle.write("changed\n")
    (view / "gone.txt").unlink()
    os.link(view / "pkg" / "mod.py", view / "pkg" / "linked.py")
    (view / "new.txt").write_text("new\n")
    assert tree_digest(base) == before
    factory.release(view)
    assert tree_digest(base) == before
    assert not os.path.ismount(view)
    shutil.rmtree(tmp_path / "attempt")


KILLED_HOLDER = """
import os, sys, time
from pathlib import Path
from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory
view = Path(sys.argv[1])
DockerSandboxFactory().provision_from(view, 64, Path(sys.argv[2]))
print("mounted", flush=True)
time.sleep(600)
"""


def test_the_view_of_a_killed_process_is_unmounted(tmp_path: Path, docker_sandboxes: Any) -> None:
    """A worker SIGKILLed with a view mounted leaves it; the next sweep (gc, a run's end)
    unmounts it and its filesystem, so its work directory can be removed."""
    import subprocess
    import sys

    if docker_sandboxes.loopfs_problem() is not None:
        pytest.skip(f"no overlay here: {docker_sandboxes.loopfs_problem()}")
    base = tmp_path / "entry"
    base.mkdir()
    (base / "f").write_text("x\n")
    view = tmp_path / "attempt" / "repo"
    view.parent.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", KILLED_HOLDER, str(view), str(base)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "mounted"
    finally:
        proc.kill()
        proc.wait()
    assert os.path.ismount(view)
    # the view, then its filesystem; how many this call releases is not asserted: another
    # xdist worker's release_stale may take one first (CI), the mounts' state below is
    docker_sandboxes.release_stale_mounts()
    assert not os.path.ismount(view)
    assert not [p for p in view.parent.iterdir() if os.path.ismount(p)]
    shutil.rmtree(view.parent)
    assert (base / "f").read_text() == "x\n"


def test_a_view_gives_what_changed_to_the_sandbox_user_and_nothing_outside(
    tmp_path: Path, docker_sandboxes: Any
) -> None:
    """layers.chown_changes: the view's new and changed entries (deep, in new directories) get
    the owner; a symlink in the view leading out of it is not followed; the base is untouched."""
    from pytest_agentbench.sandbox import layers

    if docker_sandboxes.loopfs_problem() is not None:
        pytest.skip(f"no overlay here: {docker_sandboxes.loopfs_problem()}")
    base = tmp_path / "entry"
    (base / "pkg").mkdir(parents=True)
    (base / "pkg" / "mod.py").write_text("x\n")
    os.chown(base, 4242, 4242)
    outside = tmp_path / "outside.txt"
    outside.write_text("host\n")
    view = tmp_path / "attempt" / "repo"
    view.parent.mkdir()
    docker_sandboxes.provision_from(view, 64, base)
    try:
        (view / "new" / "deep").mkdir(parents=True)
        (view / "new" / "deep" / "f").write_text("1\n")
        (view / "pkg" / "mod.py").write_text("changed\n")
        (view / "out").symlink_to(outside)
        assert layers.chown_changes(view, 4242, 4243)
        for rel in ("new", "new/deep", "new/deep/f", "pkg", "pkg/mod.py"):
            info = (view / rel).lstat()
            assert (info.st_uid, info.st_gid) == (4242, 4243), rel
        assert (view / "out").lstat().st_uid == 4242  # the link itself
        assert outside.stat().st_uid == os.getuid()  # never followed
        assert (base / "pkg" / "mod.py").stat().st_uid == os.getuid()
        assert not layers.chown_changes(tmp_path, 1, 1)  # no view there
    finally:
        docker_sandboxes.release(view)
