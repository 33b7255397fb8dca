"""Fixtures: the pieces a task item needs. Override any of them in a conftest.py.

`agentbench_attempt` runs the whole attempt during fixture setup, so that task and
infrastructure problems are pytest ERRORs and only the agent's own failures are FAILED.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agentbench.plugin.agentbench_plugin import AgentbenchPlugin, run_plugin
from pytest_agentbench.plugin.items import TaskError, failure_text, is_error
from pytest_agentbench.plugin.workers import worker_id
from pytest_agentbench.run.envcaches import open_env_cache
from pytest_agentbench.run.hostenv import owner_uid, pip_cache_dir, work_root
from pytest_agentbench.sandbox.port import SESSION_LABEL

if TYPE_CHECKING:
    from pytest_agentbench.agents.port import Agent
    from pytest_agentbench.core.attempt_config import SharedAttemptConfig
    from pytest_agentbench.core.event_sink import EventListener
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
    """The local sandbox factory, or (docker) the run's pool of engines (run/engine_pool.py):
    each attempt leases a slot of one engine."""
    from pytest_agentbench.run.engine_pool import EnginePool
    from pytest_agentbench.run.factory import sandbox_factory

    settings, state = agentbench_config.settings, agentbench_config.state
    if not settings.docker:
        yield sandbox_factory(settings.sandbox)
        return
    assert state is not None
    worker = worker_id(pytestconfig)
    own = {"agentbench.run_id": state.run_id, "agentbench.worker": worker,
           SESSION_LABEL: state.session_token}
    pool = EnginePool(agentbench_config.engines,
                      work_root(state.run_id, state.session_token) / "engine-slots",
                      prefer=_worker_number(worker), own_labels=own)
    yield pool  # type: ignore[misc]
    for problem in pool.sweep(own):  # the engine is gone: the controller's sweep reports it
        warnings.warn(f"agentbench: worker sweep skipped: {problem}", stacklevel=1)
    pool.close_all()


def _worker_number(worker: str) -> int:
    digits = "".join(ch for ch in worker if ch.isdigit())
    return int(digits) if digits else 0


@pytest.fixture(scope="session")
def agentbench_mirrors(agentbench_config: AgentbenchPlugin) -> MirrorCache:
    from pytest_agentbench.repos.mirror import MirrorCache

    return MirrorCache(agentbench_config.settings.git_cache)


@pytest.fixture
def agentbench_agent(agentbench_config: AgentbenchPlugin) -> Agent:
    """The agent under test, made fresh for each attempt from the configured variant."""
    return agentbench_config.build_agent()


@pytest.fixture
def agentbench_attempt(
    request: pytest.FixtureRequest,
    agentbench_config: AgentbenchPlugin,
    agentbench_sandbox_factory: SandboxFactory,
    agentbench_mirrors: MirrorCache,
    agentbench_agent: Agent,
) -> dict[str, Any]:
    from pytest_agentbench.run.factory import AttemptFactory

    item = request.node
    shared = _shared_attempt_config(
        agentbench_config, worker_id(request.config), _progress_listener(request.config)
    )
    attempts = AttemptFactory(
        shared, agentbench_sandbox_factory, agentbench_mirrors, lambda: agentbench_agent,
        retry_infra=agentbench_config.settings.retry_infra,
    )
    quarantine = item.get_closest_marker("agentbench_quarantine")
    record = attempts.run(  # redacted before it reaches the terminal, junit, the controller
        item.loaded,
        index=item.attempt_index,
        attempts=agentbench_config.settings.attempts,
        quarantined=quarantine.kwargs.get("reason") if quarantine else None,
    )
    item.agentbench_record = record
    if is_error(record):
        raise TaskError(failure_text(record) + setup_failure_tail(record, agentbench_config))
    return record


def _progress_listener(config: pytest.Config) -> EventListener | None:
    from pytest_agentbench.plugin.progress import PLUGIN_NAME, Progress

    progress = config.pluginmanager.get_plugin(PLUGIN_NAME)
    return progress.listener() if isinstance(progress, Progress) else None


def setup_failure_tail(record: dict[str, Any], run: AgentbenchPlugin) -> str:
    """For a failed setup command, the tail of its output that core/before_agent.py kept
    (redacted, bounded): what the ERROR text shows below the reason."""
    from pytest_agentbench.core.before_agent import SETUP_TAIL_LOG

    result, state = record["result"], run.state
    task_dir = (record.get("artifact_paths") or {}).get("task_dir")
    if result.get("failure_reason") != "SETUP_FAILED" or not task_dir or state is None:
        return ""
    path = state.path / task_dir / "logs" / SETUP_TAIL_LOG
    try:
        tail = path.read_text("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n" + run.redactor.redact(tail).rstrip("\n") if tail.strip() else ""


def _shared_attempt_config(
    run: AgentbenchPlugin, worker: str, listener: EventListener | None = None
) -> SharedAttemptConfig:
    """What every attempt of this worker shares, from the run's settings, state and image."""
    from pytest_agentbench.core.attempt_config import SharedAttemptConfig
    from pytest_agentbench.run.factory import worker_events_path

    settings, state, image = run.settings, run.state, run.image
    assert state is not None and image is not None
    return SharedAttemptConfig(
        run_id=state.run_id,
        run_dir=state.path,
        work_root=work_root(state.run_id, state.session_token),
        variant=settings.variant.name,
        variant_config_hash=settings.variant_hash(),
        image=image.name,
        image_id=image.id,
        image_digest=image.digest,
        session=state.session_token,
        worker=worker,
        events_path=worker_events_path(state.path, state.session_token, worker),
        full_logs=settings.full_logs,
        keep_workspace=settings.keep_workspace,
        ca_bundle=settings.ca_bundle,
        pip_cache=pip_cache_dir(),
        env_cache=open_env_cache(settings.env_cache, settings.env_cache_max_size),
        owner_uid=owner_uid(settings.sandbox),
        redactor=run.redactor,  # every task's own secrets, not only artifacts.redact
        agent_params=settings.variant.params,
        event_listener=listener,  # live progress (plugin/progress.py)
        regrade=settings.regrade,
        resources_scale=settings.resources_scale,
    )
