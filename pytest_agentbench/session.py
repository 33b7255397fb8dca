"""Run-level state: the run id and directory, made on the controller and shipped to workers.

The controller is the only writer of `run.json` and `attempts.jsonl`. Workers write their events
to `events/<session>-<worker>.jsonl`; the controller merges those into `events.jsonl` at the end.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_agentbench import __version__
from pytest_agentbench.core.rundir import append_jsonl, read_jsonl, write_json
from pytest_agentbench.version import harness_version


class ResumeError(Exception):
    pass


@dataclass
class RunState:
    run_id: str
    run_dir: str
    config_hash: str
    session_token: str
    done: list[str] = field(default_factory=list)  # "<task_id>#<attempt_index>" already recorded

    def to_wire(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_wire(cls, text: str) -> RunState:
        return cls(**json.loads(text))

    @property
    def path(self) -> Path:
        return Path(self.run_dir)


def new_run_id(suites: list[str], variant: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
    safe = "+".join(suites) or "tasks"
    return f"{stamp}__{safe}__{variant}__{secrets.token_hex(3)}"


def start_run(
    out: Path,
    suites: list[str],
    variant: str,
    config: dict[str, Any],
    config_hash: str,
    resume: Path | None,
) -> RunState:
    token = secrets.token_hex(4)
    if resume is None:
        run_id = new_run_id(suites, variant.replace("/", "_"))
        run_dir = out / run_id
        run_dir.mkdir(parents=True, exist_ok=False)
        write_json(
            run_dir / "run.json",
            {
                "run_id": run_id,
                "suites": suites,
                "variant": variant,
                "config": config,
                "config_hash": config_hash,
                "harness_version": harness_version(),
                "package_version": __version__,
                "started_at": datetime.now(UTC).isoformat(),
                "sessions": [token],
            },
        )
        return RunState(run_id, str(run_dir), config_hash, token)
    meta_path = resume / "run.json"
    if not meta_path.is_file():
        raise ResumeError(f"--agentbench-resume {resume}: no run.json there (not a run directory)")
    meta = json.loads(meta_path.read_text("utf-8"))
    if meta.get("config_hash") != config_hash:
        old, new = meta.get("config", {}), config
        diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        raise ResumeError(
            f"--agentbench-resume {resume}: the configuration differs from the recorded run "
            f"({', '.join(diff) or 'config hash'}); start a new run or use the same options"
        )
    done = sorted(
        {
            f"{r['task_id']}#{r['attempt_index']}"
            for r in read_jsonl(resume / "attempts.jsonl")
            if r.get("variant_config_hash") == config.get("variant_config_hash")
        }
    )
    meta.setdefault("sessions", []).append(token)
    write_json(meta_path, meta)
    return RunState(meta["run_id"], str(resume), config_hash, token, done)


def record_attempt(state: RunState, record: dict[str, Any]) -> None:
    append_jsonl(state.path / "attempts.jsonl", record)


def merge_events(state: RunState) -> int:
    """Append every worker's event file to events.jsonl (in time order) and remove the parts."""
    parts_dir = state.path / "events"
    if not parts_dir.is_dir():
        return 0
    parts = sorted(parts_dir.glob("*.jsonl"))
    events = [e for part in parts for e in read_jsonl(part)]
    events.sort(key=lambda e: (e.get("ts", ""), e.get("attempt_id", ""), e.get("seq", 0)))
    with (state.path / "events.jsonl").open("a", encoding="utf-8") as handle:
        for event in events:
            handle.write(json.dumps(event, sort_keys=True, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    for part in parts:
        part.unlink()
    parts_dir.rmdir()
    return len(events)
