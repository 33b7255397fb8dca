"""An attempt's configuration for the tests that run the pipeline themselves (AttemptPipeline,
Attempt, sandbox_spec) instead of going through pytest: one place for the made-up run around
it, so each test names only what it is about."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agentbench.core.attempt_config import AttemptConfig, SharedAttemptConfig


def attempt_config(root: Path, run_id: str = "test", *, run_dir: Path | None = None,
                   attempt_index: int = 0, attempt_label: str | None = None,
                   redact: Callable[[str], str] | None = None, **shared: Any) -> AttemptConfig:
    """The run directory (`root/run` unless given), work root and event file under `root`, a
    local image, variant `v`; `shared` sets any other SharedAttemptConfig field."""
    run_dir = run_dir or root / "run"
    fields: dict[str, Any] = {
        "run_id": run_id, "run_dir": run_dir, "work_root": root / "work", "variant": "v",
        "variant_config_hash": "h", "image": "local", "harness_version": "test",
        "events_path": run_dir / "events.jsonl", **shared}
    return AttemptConfig(SharedAttemptConfig(**fields), attempt_index=attempt_index,
                         attempt_label=attempt_label,
                         **({"redact": redact} if redact is not None else {}))
