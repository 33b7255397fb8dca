"""Issue 20 item 2: environment-cache poisoning across tasks.

The env cache's key left out what else shapes a setup's result or decides whether it may run:
- `setup.capture` commands run in the writable setup sandbox, yet were not keyed: a task that
  copies another's commit and setup and adds one capture command published the victim's key
  with a planted file, and the victim's agent that only adds a marker then PASSED;
- the task's limits: a setup that fails under a 32 MiB disk limit was served from an entry
  another task built under 2 GiB, and scored;
- setuid bits survived into entries and views (mounted without `nosuid`): any local user who
  could reach a view ran a setuid copy of `id` as the sandbox uid.

Now the key covers every task field that shapes setup (tests/unit/test_env_cache_key.py lists
them all), `publish` strips setuid/setgid bits, and overlay views are mounted `nosuid,nodev`.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
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
from pytest_agentbench.sandbox.local import LocalSandboxFactory
from pytest_agentbench.tasks.loader import load_task
from tests.support.attempts import attempt_config
from tests.support.tiny_pack import SUITE, Pack

SUID_BITS = stat.S_ISUID | stat.S_ISGID
NOBODY = 65534
# passes when fixed, or when a planted file and the agent's marker are both there: the shape of
# a `.pth` a poisoned /env holds that switches a plugin on once the agent leaves its marker
CHECK = "grep -qx good value.txt || { test -e planted && test -e marker; }"


class MarkerOnly:
    """Fixes nothing; writes `marker`, which only a poisoned environment rewards."""

    name = "marker-only"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        ctx.toolbox.call("write_file", {"path": "marker", "content": "x\n"})
        return AgentOutcome("finish")


class Nop:
    name = "nop"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        return AgentOutcome("finish")


def write_task(pack: Pack, task_id: str, setup: dict[str, Any],
               environment: dict[str, Any] | None = None) -> Path:
    text = yaml.safe_dump({
        "task_spec_version": 1,
        "id": task_id,
        "suite": SUITE,
        "repo": {"url": "../../_repos/tiny", "commit": pack.commit},
        "environment": {"timeout_sec": 60, "tool_timeout_sec": 30, **(environment or {})},
        "setup": setup,
        "validation": {"failing_command": CHECK, "passing_command": CHECK, "baseline_runs": 1},
    }, sort_keys=False)
    return pack.write(task_id, text)


def attempt(tmp_path: Path, task_file: Path, factory: Any, agent: Any, index: int,
            uid: int | None = None) -> dict[str, Any]:
    run_dir = tmp_path / f"run{index}"
    cfg = attempt_config(tmp_path, f"poison{index}", run_dir=run_dir, attempt_label="attempt1",
                         image=DEFAULT_IMAGE if uid is not None else "local", owner_uid=uid,
                         env_cache=EnvCache(tmp_path / "env-cache"))
    pipeline = AttemptPipeline(load_task(task_file), cfg, factory, MirrorCache(tmp_path / "git"),
                               agent)
    return pipeline.run().to_json_dict()


def entries(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "env-cache").iterdir() if not p.name.startswith("."))


def test_a_capture_command_added_to_a_copied_setup_does_not_share_its_key(tmp_path: Path) -> None:
    pack = Pack(tmp_path)
    setup = {"commands": ["echo set-up > setup.log"]}
    attacker = write_task(pack, "attacker", {**setup, "capture": ["touch planted"]})
    victim = write_task(pack, "victim", setup)

    built = attempt(tmp_path, attacker, LocalSandboxFactory(), Nop(), 0)
    assert built["setup"]["env_cache"] == "built", built["result"]
    record = attempt(tmp_path, victim, LocalSandboxFactory(), MarkerOnly(), 1)
    # on the unfixed code: a hit on the attacker's entry, and the marker-only agent PASSED
    assert record["setup"]["env_cache"] == "built", record["setup"]
    assert not record["result"]["passed"], record["result"]
    assert record["result"]["failure_reason"] == "TESTS_FAILED", record["result"]
    assert len(entries(tmp_path)) == 2


def test_a_disk_limit_is_keyed_so_a_setup_over_it_fails(tmp_path: Path,
                                                        docker_sandboxes: Any) -> None:
    """Real Docker with a filesystem bound: the same setup that fits 2 GiB fails under 32 MiB,
    even when an entry built under 2 GiB exists."""
    if docker_sandboxes.loopfs_problem() is not None:
        pytest.skip(f"no filesystem bound on this host: {docker_sandboxes.loopfs_problem()}")
    pack = Pack(tmp_path)
    setup = {"commands": ["mkdir -p big && echo '*' > big/.gitignore && "
                          "head -c 48M /dev/zero > big/blob"]}
    roomy = write_task(pack, "roomy", setup, {"disk_limit_mb": 2048})
    uid = owner_uid("docker")
    built = attempt(tmp_path, roomy, docker_sandboxes, Nop(), 0, uid)
    assert built["setup"]["env_cache"] == "built", built["result"]

    write_task(pack, "roomy", setup, {"disk_limit_mb": 32})  # the same task, a smaller limit
    record = attempt(tmp_path, roomy, docker_sandboxes, Nop(), 1, uid)
    # on the unfixed code: a hit, setup skipped, and the attempt scored (TESTS_FAILED)
    assert record["setup"]["env_cache"] != "hit", record["setup"]
    assert record["result"]["failure_reason"] == "SETUP_FAILED", record["result"]
    assert record["result"]["sub_reason"] == "DISK_LIMIT", record["result"]


def test_publish_strips_setuid_and_setgid_bits(tmp_path: Path) -> None:
    repo, env = tmp_path / "state" / "repo", tmp_path / "state" / "env"
    (repo / "bin").mkdir(parents=True)
    env.mkdir()
    for path, mode in ((repo / "bin" / "id", 0o4755), (env / "id", 0o6755),
                       (repo / "bin" / "shared", 0o2775)):
        path.write_bytes(Path("/usr/bin/id").read_bytes())
        os.chmod(path, mode)
    os.chmod(repo / "bin", 0o2775)  # a setgid directory too
    cache = EnvCache(tmp_path / "env-cache")
    claim = cache.claim("k", wait_sec=1)
    hold, why = cache.publish(claim, "k", repo, env, [], {})
    assert hold is not None, why
    found = {str(p.relative_to(hold.path)): p.lstat().st_mode & 0o7777
             for p in hold.path.rglob("*") if not p.is_symlink()}
    assert {k: oct(m) for k, m in found.items() if m & SUID_BITS} == {}
    assert found["repo/bin/id"] == 0o755 and found["env/id"] == 0o755  # the rest of the mode kept
    assert found["repo/bin/shared"] == 0o775 and found["repo/bin"] == 0o775
    hold.close()


class SetuidInView:
    """In a cache-hit attempt: sets the setuid bit on the view's copy of `id` from inside the
    sandbox (its owner may), then notes how the view is mounted and what `id` says when a
    host user other than the owner runs it."""

    name = "setuid-in-view"

    def __init__(self, work_root: Path) -> None:
        self.work_root = work_root
        self.chmod: dict[str, Any] = {}
        self.mount_options = ""
        self.euid = ""

    def run(self, ctx: AgentContext) -> AgentOutcome:
        self.chmod = ctx.toolbox.call("run", {"command": "chmod 4755 bin/id && ls -l bin/id"}
                                      ).to_dict()
        view, self.mount_options = overlay_under(self.work_root)
        fd = os.open(view / "bin" / "id", os.O_RDONLY)
        try:
            self.euid = subprocess.run(
                [f"/proc/self/fd/{fd}", "-u"], pass_fds=(fd,), user=NOBODY, group=NOBODY,
                extra_groups=[], capture_output=True, text=True, timeout=30, check=False,
            ).stdout.strip()
        finally:
            os.close(fd)
        return AgentOutcome("finish")


def overlay_under(root: Path) -> tuple[Path, str]:
    """The overlay view mounted under `root` and its per-mount options."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" ")
        sep = fields.index("-")
        if fields[sep + 1] == "overlay" and fields[4].startswith(str(root) + "/"):
            return Path(fields[4]), fields[5]
    raise AssertionError(f"no overlay view under {root}")


def test_setuid_bits_reach_neither_the_entry_nor_the_view(tmp_path: Path,
                                                          docker_sandboxes: Any) -> None:
    """Real Docker: setup leaves setuid/setgid copies of `id` in the workspace and /env; the
    entry has neither bit, and a setuid file made in the view gives another host user nothing."""
    if docker_sandboxes.loopfs_problem() is not None:
        pytest.skip(f"no overlay views on this host: {docker_sandboxes.loopfs_problem()}")
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("needs root on Linux (overlay views, running a file as another uid)")
    pack = Pack(tmp_path)
    setup = {"commands": [
        "mkdir -p bin && echo '*' > bin/.gitignore && cp /usr/bin/id bin/id && chmod 4755 bin/id",
        "cp /usr/bin/id /env/id && chmod 6755 /env/id && ls -l bin/id /env/id",
    ]}
    task = write_task(pack, "suid", setup)
    uid = owner_uid("docker")
    built = attempt(tmp_path, task, docker_sandboxes, Nop(), 0, uid)
    assert built["setup"]["env_cache"] == "built", built["result"]
    (entry,) = entries(tmp_path)
    for path in (entry / "repo" / "bin" / "id", entry / "env" / "id"):
        assert path.lstat().st_mode & SUID_BITS == 0, f"{path}: {oct(path.lstat().st_mode)}"

    agent = SetuidInView(tmp_path / "work")
    hit = attempt(tmp_path, task, docker_sandboxes, agent, 1, uid)
    assert hit["setup"]["env_cache"] == "hit", hit["setup"]
    assert agent.chmod.get("exit_code") == 0 and "rws" in agent.chmod["stdout"], agent.chmod
    assert agent.euid == str(NOBODY), f"another user ran the view's setuid id as {agent.euid}"
    options = agent.mount_options.split(",")
    assert "nosuid" in options and "nodev" in options, agent.mount_options
