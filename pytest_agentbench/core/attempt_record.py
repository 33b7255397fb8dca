"""The attempt record: built from what the phases of an attempt found, or, for an
attempt whose worker died, from what the controller still knows (pytest-free: the plugin calls
`crash_record`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_agentbench.agents.port import AgentOutcome
from pytest_agentbench.core.attempt_config import AttemptConfig, attempt_id, scaled_resources
from pytest_agentbench.core.oom_count import oom_kills
from pytest_agentbench.schemas.events import utc_now
from pytest_agentbench.schemas.records import (
    AgentStats,
    AttemptRecord,
    BaselineValidation,
    ImageInfo,
    Limits,
    Result,
    SetupInfo,
    Timestamps,
)
from pytest_agentbench.schemas.task import AgentSpec, EnvironmentSpec, TaskSpec
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.version import harness_version


@dataclass
class AttemptFindings:
    """What the phases of one attempt found, filled in as they run; the record is built from
    it."""

    commit: str  # the task's commit as checked out (the spec's until the checkout ran)
    timings: dict[str, float] = field(default_factory=dict)
    setup: SetupInfo = field(default_factory=SetupInfo)
    baseline: BaselineValidation = field(default_factory=BaselineValidation)
    agent: AgentStats = field(default_factory=AgentStats)
    outcome: AgentOutcome | None = None
    agent_time_limit_sec: float | None = None  # set when the agent gets control


def build_record(
    cfg: AttemptConfig,
    spec: TaskSpec,
    attempt: str,
    findings: AttemptFindings,
    result: Result,
    *,
    started_at: str,
    duration: float,
    artifacts_dir: str,
) -> AttemptRecord:
    """The record of a finished attempt; `attempt` is its id, `artifacts_dir` its artifact
    folder relative to the run directory."""
    outcome = findings.outcome
    return AttemptRecord(
        run_id=cfg.shared.run_id,
        attempt_id=attempt,
        task_id=spec.id,
        suite=spec.suite,
        variant=cfg.shared.variant,
        variant_config_hash=cfg.shared.variant_config_hash,
        attempt_index=cfg.attempt_index,
        task_spec_version=spec.task_spec_version,
        task_commit=findings.commit,
        harness_version=cfg.shared.harness_version,
        worker=cfg.shared.worker,
        quarantined=cfg.quarantined,
        model=outcome.model if outcome else None,
        usage=outcome.usage if outcome else None,
        timestamps=Timestamps(started_at=started_at, ended_at=utc_now()),
        duration_sec=round(duration, 3),
        timings=findings.timings,
        setup=findings.setup,
        baseline_validation=findings.baseline,
        agent=findings.agent,
        result=result,
        limits=limits_of(
            spec, agent_time_limit_sec=findings.agent_time_limit_sec,
            resources_scale=cfg.shared.resources_scale,
            oom_kills=oom_kills(cfg.shared.events_path, attempt,
                                cfg.shared.run_dir / artifacts_dir / "agent" / "tool_calls.jsonl",
                                result)),
        image=ImageInfo(name=cfg.shared.image, id=cfg.shared.image_id,
                        digest=cfg.shared.image_digest),
        artifact_paths={
            "task_dir": artifacts_dir,
            "failing_stdout": "logs/failing_stdout.txt",
            "passing_stdout": "logs/passing_stdout.txt",
        },
    )


def crash_record(
    *,
    run_id: str,
    session_token: str,
    spec: TaskSpec,
    variant: str,
    variant_config_hash: str,
    attempt_index: int,
    worker: str,
    summary: str,
    resources_scale: float = 1.0,
) -> AttemptRecord:
    """A worker died mid-attempt: SANDBOX_ERROR (WORKER_CRASH) rather than a silent gap; its
    limits are the run's (`resources_scale` applied), its OOM kills unknown."""
    return _record_of_no_run(
        attempt_id(run_id, spec.id, variant, attempt_index, session_token),
        run_id=run_id,
        task_id=spec.id,
        suite=spec.suite,
        variant=variant,
        variant_config_hash=variant_config_hash,
        attempt_index=attempt_index,
        task_spec_version=spec.task_spec_version,
        task_commit=spec.repo.commit,
        worker=worker,
        result=Result(
            passed=False,
            failure_reason=Reason.SANDBOX_ERROR,
            sub_reason="WORKER_CRASH",
            summary=summary,
        ),
        limits=limits_of(spec, resources_scale=resources_scale),
    )


def _record_of_no_run(attempt: str, **fields: Any) -> AttemptRecord:
    """The record of an attempt the controller or collection writes for a worker that died or a
    task that never ran: no duration, an ERROR, this harness's version."""
    now = utc_now()
    return AttemptRecord(
        attempt_id=attempt,
        harness_version=harness_version(),
        timestamps=Timestamps(started_at=now, ended_at=now),
        duration_sec=0.0,
        pytest_outcome="error",
        **fields,
    )


def limits_of(spec: TaskSpec, agent_time_limit_sec: float | None = None,
              resources_scale: float = 1.0, oom_kills: int | None = None) -> Limits:
    """The budgets and the resource policy a paired comparison must see equal on both sides:
    the CPU and memory limits as the agent's and scoring sandboxes got them (`resources_scale`
    applied, core/attempt_config.scaled_resources); `agent_time_limit_sec` what the agent had,
    when it ran; `oom_kills` None when not counted."""
    return _limits(spec.environment, spec.agent, resources_scale, oom_kills,
                   agent_time_limit_sec)


def _limits(env: EnvironmentSpec, agent: AgentSpec, scale: float, oom: int | None,
            agent_time_limit_sec: float | None = None) -> Limits:
    cpu, mem = scaled_resources(env, scale)
    return Limits(
        timeout_sec=env.timeout_sec,
        tool_timeout_sec=env.tool_timeout_sec,
        max_steps=agent.max_steps,
        cpu_limit=cpu,
        mem_limit_mb=mem,
        agent_time_limit_sec=agent_time_limit_sec,
        pids_limit=env.pids_limit,
        disk_limit_mb=env.disk_limit_mb,
        mem_reservation_mb=None,  # the sandbox sets a hard limit only (memory + swap equal)
        resources_scale=scale,
        oom_kills=oom,
    )


def invalid_task_record(
    *,
    run_id: str,
    session_token: str,
    task_id: str,
    suite: str,
    variant: str,
    variant_config_hash: str,
    worker: str,
    problems: list[str],
) -> AttemptRecord:
    """A task whose task.yaml (or directory) failed validation: TASK_INVALID, so that it has a
    line in attempts.jsonl and a row in the report instead of vanishing. It never ran: its
    limits are the spec's defaults, its commit unknown."""
    env, agent = EnvironmentSpec(), AgentSpec()
    return _record_of_no_run(
        attempt_id(run_id, task_id, variant, 0, session_token),
        run_id=run_id,
        task_id=task_id,
        suite=suite,
        variant=variant,
        variant_config_hash=variant_config_hash,
        attempt_index=0,
        task_spec_version=1,
        task_commit="",
        worker=worker,
        result=Result(
            passed=False,
            failure_reason=Reason.TASK_INVALID,
            summary="\n".join(problems) or "invalid task",
        ),
        # it never ran: no OOM kill, and no scale it ran under (its limits are the defaults)
        limits=_limits(env, agent, 1.0, 0).model_copy(update={"resources_scale": None}),
    )
