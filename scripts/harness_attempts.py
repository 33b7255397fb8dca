"""The harness side of the attempt benchmarks (scripts/bench_overhead.py, bench_env_cache.py,
bench_agent_step.py): the made-up run an attempt of theirs belongs to, and one timed attempt
through the AttemptPipeline whose failure is listed rather than raised (a benchmark times it all
the same and exits 1 at its end)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pytest_agentbench.agents.port import Agent
from pytest_agentbench.core.attempt_config import AttemptConfig, SharedAttemptConfig
from pytest_agentbench.core.pipeline import AttemptPipeline
from pytest_agentbench.schemas.records import AttemptRecord


def bench_config(work: Path, image: Any, *, run_id: str, variant: str, attempt_index: int = 0,
                 attempt_label: str | None = None, **shared: Any) -> AttemptConfig:
    """Run directory `work/run`, work root `work/ws`, the built runner `image` (name and id);
    `shared` sets any other SharedAttemptConfig field (owner uid, caches, events path)."""
    return AttemptConfig(
        SharedAttemptConfig(run_id=run_id, run_dir=work / "run", work_root=work / "ws",
                            variant=variant, variant_config_hash="bench", image=image.name,
                            image_id=image.image_id, harness_version="bench", **shared),
        attempt_index=attempt_index, attempt_label=attempt_label)


def timed_attempt(task: Any, cfg: AttemptConfig, factory: Any, mirrors: Any, agent: Agent,
                  label: str, problems: list[str]) -> tuple[float, AttemptRecord]:
    """One attempt's wall time and record; one that does not pass adds a line to `problems`."""
    start = time.perf_counter()
    record = AttemptPipeline(task, cfg, factory, mirrors, agent).run()
    elapsed = time.perf_counter() - start
    if not record.result.passed:
        r = record.result
        problems.append(f"{label}: {r.failure_reason} {r.sub_reason or ''} "
                        f"{r.summary or ''}".rstrip())
    return elapsed, record
