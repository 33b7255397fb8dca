"""An attempt on a pool of engines: each try leases an engine, and a try whose engine was lost
(SANDBOX_ERROR / ENGINE_LOST) is run again on another engine, up to `--agentbench-retry-infra`
times. The attempt keeps one record: its last try's, with the earlier tries in `retried` (engine,
reason, summary, duration and where their artifacts were moved: `<attempt dir>.try<N>`). No try
is lost and none is counted twice: reports count the attempt once, by its last try, and can
leave retried attempts out (reporting: "without retries").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agentbench.run.engine_pool import EnginePool

ENGINE_LOST = "ENGINE_LOST"

RunTry = Callable[[Any], dict[str, Any]]  # a lease's factory -> the try's redacted record


def lost_engine(record: dict[str, Any]) -> bool:
    result = record.get("result") or {}
    return bool(result.get("failure_reason") == "SANDBOX_ERROR"
                and result.get("sub_reason") == ENGINE_LOST)


def run_with_retries(pool: EnginePool, retries: int, run_try: RunTry,
                     run_dir: Path) -> dict[str, Any]:
    """Run tries until one ends for a reason other than a lost engine, or `retries` retries
    were spent, or no engine is left that this attempt has not lost."""
    lost: set[str] = set()
    earlier: list[dict[str, Any]] = []
    while True:
        started = time.monotonic()
        with pool.lease(frozenset(lost)) as lease:
            record = run_try(lease.factory)
        record["engine"] = lease.engine
        if not lost_engine(record):
            pool.mark_up(lease.engine)
            break
        pool.mark_lost(lease.engine)
        lost.add(lease.engine)
        if len(earlier) >= retries or not set(pool.names) - lost:
            break
        earlier.append(_set_aside(record, len(earlier) + 1, run_dir,
                                  round(time.monotonic() - started, 3)))
    record["retried"] = earlier
    return record


def _set_aside(record: dict[str, Any], number: int, run_dir: Path,
               seconds: float) -> dict[str, Any]:
    """The try's artifacts moved out of the attempt's directory (the next try writes there),
    and what the record keeps of it."""
    rel = (record.get("artifact_paths") or {}).get("task_dir")
    moved = None
    if rel:
        source = run_dir / rel
        target = source.with_name(f"{source.name}.try{number}")
        extra = 1
        while target.exists():  # left by an interrupted session of a resumed run
            extra += 1
            target = source.with_name(f"{source.name}.try{number}-{extra}")
        if source.is_dir():
            source.rename(target)
            moved = target.relative_to(run_dir).as_posix()
    result = record["result"]
    return {"engine": record["engine"], "failure_reason": result["failure_reason"],
            "sub_reason": result.get("sub_reason"), "summary": result.get("summary") or "",
            "duration_sec": record.get("duration_sec", seconds), "artifacts_dir": moved,
            "usage": record.get("usage")}
