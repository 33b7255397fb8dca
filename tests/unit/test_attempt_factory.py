"""The one attempt factory (run/factory.py) and the one oracle+nop validation (run/validation.py)
that the plugin, replay, validate-tasks and the doctor share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.agents.builtin import NopAgent
from pytest_agentbench.core.attempt_config import SharedAttemptConfig, sandbox_spec
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.run.factory import (
    AttemptFactory,
    sandbox_factory,
    worker_events_path,
)
from pytest_agentbench.run.validation import ACCEPTED, judge
from pytest_agentbench.tasks.loader import LoadedTask, load_task
from pytest_agentbench.text.redaction import Redactor

SECRET = "s3cret-repo-token-123"
TASK_YAML = f"""task_spec_version: 1
id: factory-probe
suite: probe
repo: {{url: "https://bot:{SECRET}@git.example.invalid/r.git", commit: "{'a' * 40}"}}
validation:
  failing_command: python -m pytest -q
  passing_command: python -m pytest -q
"""


@pytest.fixture
def task(tmp_path: Path) -> LoadedTask:
    path = tmp_path / "probe" / "factory-probe" / "task.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(TASK_YAML)
    return load_task(path, check_layout=False)


def shared(tmp_path: Path, **fields: Any) -> SharedAttemptConfig:
    return SharedAttemptConfig(run_id="r1", run_dir=tmp_path / "run", work_root=tmp_path / "w",
                               variant="v", variant_config_hash="h", harness_version="t",
                               **fields)


def factory(config: SharedAttemptConfig) -> AttemptFactory:
    return AttemptFactory(config, sandbox_factory("local"), MirrorCache(None), NopAgent)


def test_config_carries_the_shared_fields_and_the_attempt(tmp_path: Path,
                                                          task: LoadedTask) -> None:
    events = worker_events_path(tmp_path / "run", "tok", "gw1")
    config = shared(tmp_path, session="tok", worker="gw1", events_path=events, full_logs=True,
                    image="img", image_id="sha256:1", agent_params={"x": 1})
    cfg = factory(config).config(task, index=2, attempts=3, quarantined="flaky")
    assert cfg.shared is config  # one object, never copied field by field
    assert (cfg.attempt_index, cfg.attempt_label, cfg.quarantined) == (2, "attempt-3", "flaky")
    assert cfg.shared.events_path == tmp_path / "run" / "events" / "tok-gw1.jsonl"
    assert factory(config).config(task).attempt_label is None  # one attempt: no attempt-N dir


def test_keep_workspace_run_task_or_override(tmp_path: Path, task: LoadedTask) -> None:
    assert not factory(shared(tmp_path)).config(task).keep_workspace
    assert factory(shared(tmp_path, keep_workspace=True)).config(task).keep_workspace
    kept = task.spec.model_copy(update={"artifacts": task.spec.artifacts.model_copy(
        update={"keep_workspace": True})})
    asks = LoadedTask(**{**task.__dict__, "spec": kept})
    assert factory(shared(tmp_path)).config(asks).keep_workspace
    assert not factory(shared(tmp_path)).config(asks, keep_workspace=False).keep_workspace


def test_redaction_covers_the_tasks_own_secrets(tmp_path: Path, task: LoadedTask) -> None:
    cfg = factory(shared(tmp_path)).config(task)  # no run redactor: Redactor.for_task
    assert SECRET not in cfg.redact(f"fatal: could not read {SECRET}")
    run_redactor = Redactor.for_tasks([task.spec])
    assert factory(shared(tmp_path, redactor=run_redactor)).redactor(task) is run_redactor


def test_sandbox_factory_is_the_one_choice() -> None:
    assert type(sandbox_factory("local")).__name__ == "LocalSandboxFactory"
    with pytest.raises(ValueError, match="docker or local"):
        sandbox_factory("podman")


def record(passed: bool, reason: str | None = None, summary: str = "s") -> dict[str, Any]:
    return {"result": {"passed": passed, "failure_reason": reason, "summary": summary}}


@pytest.mark.parametrize(("oracle", "nop", "ok", "detail"), [
    (record(True), record(False, "TESTS_FAILED"), True, ACCEPTED),
    (record(False, "SETUP_FAILED", "boom"), record(False, "SETUP_FAILED"), False,
     "SETUP_FAILED: boom"),  # the task's own verdict, before any agent
    (record(False, "TESTS_FAILED", "still red"), record(False, "TESTS_FAILED"), False,
     "oracle fails: TESTS_FAILED: still red"),
    (record(True), record(True), False, "passes under nop: nothing for an agent to fix"),
    (record(True), record(False, "TIMEOUT", "slow"), False,
     "nop should fail with TESTS_FAILED, got TIMEOUT: slow"),
    (record(True), record(False, None), False,  # no reason is not TESTS_FAILED
     "nop should fail with TESTS_FAILED, got None: s"),
])
def test_oracle_must_pass_and_nop_must_fail_with_tests_failed(
        oracle: dict[str, Any], nop: dict[str, Any], ok: bool, detail: str) -> None:
    assert judge(oracle, nop) == (ok, detail)



def test_sandbox_lifetime_outlasts_every_phase_before_and_after_the_agents_clock(
    tmp_path: Path, task: LoadedTask
) -> None:
    """The agent's clock starts when it gets control; the sandbox it works in may already have
    served setup, every capture command and every baseline run. Its dead-man's switch must
    outlast all of them plus the agent's whole time, or an agent with time left is killed."""
    env, validation = task.spec.environment, task.spec.validation
    captures = task.spec.setup.model_copy(update={"capture": [f"cat log{i}" for i in range(10)]})
    spec = task.spec.model_copy(update={"setup": captures})
    cfg = factory(shared(tmp_path)).config(task)
    lifetime = sandbox_spec(cfg, spec, tmp_path, False, "agent").lifetime_sec
    runs = 10 + validation.baseline_runs + 1  # captures, baseline runs, the results read
    before_agent = env.setup_timeout_sec + runs * env.tool_timeout_sec
    assert lifetime > before_agent + env.timeout_sec
