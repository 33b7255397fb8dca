"""Fixtures: the pieces a task item needs. Override any of them in a conftest.py.

`agentbench_attempt` runs the whole attempt during fixture setup, so that task and
infrastructure problems are pytest ERRORs and only the agent's own failures are FAILED.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agentbench.agents.variants import agent_factories, make_agent
from pytest_agentbench.plugin.items import AB_KEY, TaskError, failure_text, is_error
from pytest_agentbench.plugin.workers import worker_id
from pytest_agentbench.run.hostenv import env_cache, owner_uid, pip_cache_dir, work_root
from pytest_agentbench.sandbox.port import SandboxError
from pytest_agentbench.version import harness_version

if TYPE_CHECKING:
    from pytest_agentbench.plugin.active import AgentbenchConfig
    from pytest_agentbench.repos.mirror import MirrorCache
    from pytest_agentbench.sandbox.port import SandboxFactory


@pytest.fixture(scope="session")
def agentbench_config(pytestconfig: pytest.Config) -> AgentbenchConfig:
    ab = pytestconfig.stash.get(AB_KEY, None)
    if ab is None:
        pytest.skip("agentbench is not active (no --agentbench-suite)")
    return ab


@pytest.fixture(scope="session")
def agentbench_sandbox_factory(
    agentbench_config: AgentbenchConfig, pytestconfig: pytest.Config
) -> Iterator[SandboxFactory]:
    if agentbench_config.options["sandbox"] == "local":
        from pytest_agentbench.sandbox.local import LocalSandboxFactory

        yield LocalSandboxFactory()
        return
    from pytest_agentbench.sandbox.docker import DockerSandboxFactory

    factory = DockerSandboxFactory()
    yield factory
    assert agentbench_config.state is not None
    try:
        factory.sweep(
            {
                "agentbench.run_id": agentbench_config.state.run_id,
                "agentbench.worker": worker_id(pytestconfig),
            }
        )
    except SandboxError as exc:  # the engine is gone: the controller's sweep reports it once
        warnings.warn(f"agentbench: worker sweep skipped: {exc}", stacklevel=1)


@pytest.fixture(scope="session")
def agentbench_mirrors(agentbench_config: AgentbenchConfig) -> MirrorCache:
    from pytest_agentbench.repos.mirror import MirrorCache

    root = agentbench_config.options["git_cache"]
    return MirrorCache(Path(root) if root else None)


@pytest.fixture
def agentbench_agent(agentbench_config: AgentbenchConfig, pytestconfig: pytest.Config) -> Any:
    """The agent under test, made fresh for each attempt from the configured variant."""
    hooks = pytestconfig.hook.pytest_agentbench_agents()
    return make_agent(agentbench_config.variant, agent_factories(hooks))


@pytest.fixture
def agentbench_attempt(
    request: pytest.FixtureRequest,
    agentbench_config: AgentbenchConfig,
    agentbench_sandbox_factory: SandboxFactory,
    agentbench_mirrors: MirrorCache,
    agentbench_agent: Any,
) -> dict[str, Any]:
    from pytest_agentbench.core.trial import Trial, TrialConfig

    item = request.node
    loaded, index = item.loaded, item.attempt_index
    ab, state = agentbench_config, agentbench_config.state
    assert state is not None
    worker = worker_id(request.config)
    redactor = ab.redactor  # knows every task's own secrets, not only artifacts.redact
    quarantine = item.get_closest_marker("agentbench_quarantine")
    cfg = TrialConfig(
        run_id=state.run_id,
        run_dir=state.path,
        work_root=work_root(state.run_id),
        session=state.session_token,
        variant=ab.variant.name,
        variant_config_hash=ab.variant_hash(),
        image=ab.image.get("name") or "local",
        image_id=ab.image.get("id"),
        image_digest=ab.image.get("digest"),
        harness_version=harness_version(),
        attempt_index=index,
        attempt_label=f"attempt-{index + 1}" if ab.attempts > 1 else None,
        worker=worker,
        full_logs=ab.options["full_logs"],
        keep_workspace=ab.options["keep_workspace"] or loaded.spec.artifacts.keep_workspace,
        ca_bundle=Path(ab.options["ca_bundle"]) if ab.options["ca_bundle"] else None,
        pip_cache=pip_cache_dir(),
        owner_uid=owner_uid(ab.options["sandbox"]),
        events_path=state.path / "events" / f"{state.session_token}-{worker}.jsonl",
        redact=redactor.redact,
        redact_obj=redactor.redact_obj,
        agent_params={
            **ab.variant.params,
            "_variant": ab.variant.config(),
            "_llm_cli": ab.options["llm"],
            "_redactor": redactor,
        },
        quarantined=quarantine.kwargs.get("reason") if quarantine else None,
        env_cache=env_cache(ab.options["env_cache"]),
    )
    record = (
        Trial(loaded, cfg, agentbench_sandbox_factory, agentbench_mirrors, agentbench_agent)
        .run()
        .to_json_dict()
    )
    record = redactor.redact_record(record)  # before it reaches the terminal, junit, the controller
    item.agentbench_record = record
    if is_error(record):
        raise TaskError(failure_text(record))
    return record
