"""The attempt record built from a finished Trial (spec §4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_agentbench.core.events import utc_now
from pytest_agentbench.schemas.records import (
    AttemptRecord,
    ImageInfo,
    Limits,
    Result,
    Timestamps,
)
from pytest_agentbench.schemas.task import TaskSpec

if TYPE_CHECKING:
    from pytest_agentbench.core.trial import Trial


def build_record(trial: Trial, result: Result, started_at: str, duration: float) -> AttemptRecord:
    outcome = trial.outcome
    return AttemptRecord(
        run_id=trial.cfg.run_id,
        attempt_id=trial.attempt_id,
        task_id=trial.spec.id,
        suite=trial.spec.suite,
        variant=trial.cfg.variant,
        variant_config_hash=trial.cfg.variant_config_hash,
        attempt_index=trial.cfg.attempt_index,
        task_spec_version=trial.spec.task_spec_version,
        task_commit=getattr(trial, "commit", trial.spec.repo.commit),
        harness_version=trial.cfg.harness_version,
        worker=trial.cfg.worker,
        quarantined=trial.cfg.quarantined,
        model=outcome.model if outcome else None,
        usage=outcome.usage if outcome else None,
        timestamps=Timestamps(started_at=started_at, ended_at=utc_now()),
        duration_sec=round(duration, 3),
        timings=trial.timings,
        setup=trial.setup,
        baseline_validation=trial.baseline,
        agent=trial.agent_stats,
        result=result,
        limits=limits_of(trial.spec),
        image=ImageInfo(name=trial.cfg.image, id=trial.cfg.image_id, digest=trial.cfg.image_digest),
        artifact_paths={
            "task_dir": trial.paths.rel.as_posix(),
            "failing_stdout": "logs/failing_stdout.txt",
            "passing_stdout": "logs/passing_stdout.txt",
        },
    )


def limits_of(spec: TaskSpec) -> Limits:
    """The budgets a paired comparison must see equal on both sides."""
    env = spec.environment
    return Limits(
        timeout_sec=env.timeout_sec,
        tool_timeout_sec=env.tool_timeout_sec,
        max_steps=spec.agent.max_steps,
        cpu_limit=env.cpu_limit,
        mem_limit_mb=env.mem_limit_mb,
    )
