"""Fixtures: the pieces a task item needs. Override any of them in a conftest.py.

`agentbench_attempt` runs the whole attempt during fixture setup, so that task and
infrastructure problems are pytest ERRORs and only the agent's own failures are FAILED.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agentbench.plugin.hooks import AgentbenchPlugin, run_plugin
from pytest_agentbench.plugin.items import TaskError, failure_text, is_error
from pytest_agentbench.plugin.workers import worker_id
from pytest_agentbench.run.hostenv import env_cache, owner_uid, pip_cache_dir, work_root
from pytest_agentbench.sandbox.port import SandboxError
from pytest_agentbench.version import harness_version

if TYPE_CHECKING:
    from pytest_agentbench.repos.mirror import MirrorCache
    from pytest_agentbench.sandbox.port import SandboxFactory


@pytest.fixture(scope="session")
def agentbench_config(pytestconfig: pytest.Config) -> AgentbenchPlugin:
    """The run's plugin object: its settings, tasks, image, state and redactor."""
    plugin = run_plugin(pytestconfig)
    if plugin is None:
        pytest.skip("agentbench is not active (no --agentbench-suite)")
    return plugin


@pytest.fixture(scope="session")
def agentbench_sandbox_factory(
    agentbench_config: AgentbenchPlugin, pytestconfig: pytest.Config
) -> Iterator[SandboxFactory]:
    if not agentbench_config.settings.docker:
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
def agentbench_mirrors(agentbench_config: AgentbenchPlugin) -> MirrorCache:
    from pytest_agentbench.repos.mirror import MirrorCache

    return MirrorCache(agentbench_config.settings.git_cache)


@pytest.fixture
def agentbench_agent(agentbench_config: AgentbenchPlugin) -> Any:
    """The agent under test, made fresh for each attempt from the configured variant."""
    return agentbench_config.build_agent()


@pytest.fixture
def agentbench_attempt(
    request: pytest.FixtureRequest,
    agentbench_config: AgentbenchPlugin,
    agentbench_sandbox_factory: SandboxFactory,
    agentbench_mirrors: MirrorCache,
    agentbench_agent: Any,
) -> dict[str, Any]:
    from pytest_agentbench.core.trial import Trial, TrialConfig

    item = request.node
    loaded, index = item.loaded, item.attempt_index
    settings, state = agentbench_config.settings, agentbench_config.state
    image = agentbench_config.image
    assert state is not None and image is not None
    worker = worker_id(request.config)
    redactor = agentbench_config.redactor  # every task's own secrets, not only artifacts.redact
    quarantine = item.get_closest_marker("agentbench_quarantine")
    cfg = TrialConfig(
        run_id=state.run_id,
        run_dir=state.path,
        work_root=work_root(state.run_id),
        session=state.session_token,
        variant=settings.variant.name,
        variant_config_hash=settings.variant_hash(),
        image=image.name,
        image_id=image.id,
        image_digest=image.digest,
        harness_version=harness_version(),
        attempt_index=index,
        attempt_label=f"attempt-{index + 1}" if settings.attempts > 1 else None,
        worker=worker,
        full_logs=settings.full_logs,
        keep_workspace=settings.keep_workspace or loaded.spec.artifacts.keep_workspace,
        ca_bundle=settings.ca_bundle,
        pip_cache=pip_cache_dir(),
        owner_uid=owner_uid(settings.sandbox),
        events_path=state.path / "events" / f"{state.session_token}-{worker}.jsonl",
        redact=redactor.redact,
        redact_obj=redactor.redact_obj,
        agent_params={
            **settings.variant.params,
            "_variant": settings.variant.config(),
            "_llm_cli": dict(settings.llm),
            "_redactor": redactor,
        },
        quarantined=quarantine.kwargs.get("reason") if quarantine else None,
        env_cache=env_cache(settings.env_cache),
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
