"""Issue 8 item 8c (and the disk limit's plumbing, item 8a): what a sandbox is given per task.

On 4a9ba26 every setup sandbox mounted the one pip cache shared by every task and run: a task's
setup could plant a poisoned wheel that another task's `pip install` then used. Now each task
gets its own cache directory under the shared root (keyed by suite, task id and repository URL),
and no agent or scoring sandbox gets one. The task's disk limit reaches the SandboxSpec.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.core.attempt_config import AttemptConfig, sandbox_spec
from pytest_agentbench.schemas.task import TaskSpec
from tests.support.attempts import attempt_config


def task(task_id: str, url: str = "https://example.com/r.git", suite: str = "s",
         **environment: Any) -> TaskSpec:
    return TaskSpec.model_validate({
        "task_spec_version": 1, "id": task_id, "suite": suite,
        "repo": {"url": url, "commit": "abc1234"},
        "environment": environment,
        "validation": {"failing_command": "false", "passing_command": "true"},
    })


def config(tmp_path: Path) -> AttemptConfig:
    return attempt_config(tmp_path, image="img", pip_cache=tmp_path / "pip")


def cache_of(tmp_path: Path, spec: TaskSpec, phase: str = "setup") -> Path | None:
    return sandbox_spec(config(tmp_path), spec, tmp_path / "ws", True, phase).pip_cache


def test_each_task_gets_its_own_pip_cache(tmp_path: Path) -> None:
    caches = {cache_of(tmp_path, task("a")), cache_of(tmp_path, task("b")),
              cache_of(tmp_path, task("a", url="https://example.com/other.git")),
              cache_of(tmp_path, task("a", suite="t"))}
    assert len(caches) == 4
    for cache in caches:
        assert cache is not None and cache.parent == tmp_path / "pip"
    assert cache_of(tmp_path, task("a")) == cache_of(tmp_path, task("a"))  # attempts share


def test_credentials_in_the_url_stay_out_of_the_path(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, task("a", url="https://alice:S3cret-token@example.com/r.git"))
    assert cache is not None and "S3cret" not in str(cache) and "alice" not in str(cache)


@pytest.mark.parametrize("phase", ["agent", "score"])
def test_agent_and_scoring_sandboxes_get_no_cache(tmp_path: Path, phase: str) -> None:
    assert cache_of(tmp_path, task("a"), phase) is None


def test_the_disk_limit_reaches_the_sandbox(tmp_path: Path) -> None:
    default = sandbox_spec(config(tmp_path), task("a"), tmp_path / "ws", False, "agent")
    assert default.disk_limit_mb == 2048
    small = sandbox_spec(config(tmp_path), task("a", disk_limit_mb=64), tmp_path / "ws",
                         False, "score")
    assert small.disk_limit_mb == 64
