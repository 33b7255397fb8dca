"""Run-level state: the run id and directory, made on the controller and shipped to workers.

The controller is the only writer of `run.json` and `attempts.jsonl` (run/writer.py). Workers
write their events to `events/<session>-<worker>.jsonl`; the controller merges those into
`events.jsonl` at the end. A resumed run skips the attempts its directory already holds, by
attempt key (`attempt_key`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_agentbench import __version__
from pytest_agentbench.core.rundir import read_jsonl, repair_jsonl, write_json
from pytest_agentbench.paths.output_root import mark_output_root, unmark_if_empty
from pytest_agentbench.run.settings import OutDirError, RunSettings
from pytest_agentbench.schemas.records import attempt_key
from pytest_agentbench.version import harness_version


class ResumeError(Exception):
    pass


@dataclass
class RunState:
    run_id: str
    run_dir: str
    config_hash: str
    session_token: str
    done: list[str] = field(default_factory=list)  # attempt keys already recorded
    notes: list[str] = field(default_factory=list)  # torn lines set aside, lines skipped
    resumed: bool = False  # continues a run directory made by an earlier session

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


def run_config(settings: RunSettings, image_ref: str | None) -> dict[str, Any]:
    """What must match for --agentbench-resume to continue a run (`image_ref`: the runner
    image's id, or its name when it has none)."""
    config = {
        "suites": list(settings.suites),
        "variant": settings.variant.config(),
        "variant_config_hash": settings.variant_hash(),
        "attempts": settings.attempts,
        "image": image_ref,
        "sandbox": settings.sandbox,
    }
    if settings.regrade:  # only when asked: the config hash of a run without it is unchanged
        config["regrade"] = settings.regrade
    if settings.resources_scale != 1.0:  # likewise: a resumed run keeps its scale
        config["resources_scale"] = settings.resources_scale
    return config


def config_hash(config: dict[str, Any]) -> str:
    blob = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def start_run(
    settings: RunSettings,
    image_ref: str | None,
    redact_obj: Callable[[Any], Any] = lambda obj: obj,
) -> RunState:
    """Make the run directory and its run.json, or, resuming, check the recorded configuration
    matches and collect the attempts already done (a torn last line is set aside first)."""
    config = run_config(settings, image_ref)
    chash = config_hash(config)
    token = secrets.token_hex(4)
    if settings.resume is None:
        suites = list(settings.suites)
        run_id = settings.run_name or new_run_id(suites, settings.variant.name.replace("/", "_"))
        run_dir = settings.out / run_id
        _make_run_dir(run_dir, f"{settings.out_label}={settings.out}")
        write_json(
            run_dir / "run.json",
            {
                "run_id": run_id,
                "suites": suites,
                "variant": settings.variant.name,
                "config": redact_obj(config),
                "config_hash": chash,
                "harness_version": harness_version(),
                "package_version": __version__,
                "started_at": datetime.now(UTC).isoformat(),
                "sessions": [token],
            },
        )
        mark_output_root(settings.out)  # git and a plain pytest leave it alone
        return RunState(run_id, str(run_dir), chash, token)
    resume = settings.resume
    meta_path = resume / "run.json"
    if not meta_path.is_file():
        raise ResumeError(f"--agentbench-resume {resume}: no run.json there (not a run directory)")
    meta = json.loads(meta_path.read_text("utf-8"))
    if meta.get("config_hash") != chash:
        old, new = meta.get("config", {}), redact_obj(config)
        diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        raise ResumeError(
            f"--agentbench-resume {resume}: the configuration differs from the recorded run "
            f"({', '.join(diff) or 'config hash'}); start a new run or use the same options"
        )
    # a controller killed mid-write left a fragment: set it aside before anything is appended
    notes = [n for f in ("attempts.jsonl", "events.jsonl") if (n := repair_jsonl(resume / f))]
    done = sorted(
        {
            attempt_key(r.get("task_id", ""), r.get("attempt_index", -1))
            for r in read_jsonl(resume / "attempts.jsonl", notes)
            if r.get("variant_config_hash") == config.get("variant_config_hash")
        }
    )
    meta.setdefault("sessions", []).append(token)
    write_json(meta_path, meta)
    return RunState(meta["run_id"], str(resume), chash, token, done, notes, resumed=True)


def _make_run_dir(run_dir: Path, where: str) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=False)
    except OSError as exc:
        failed = exc.filename or run_dir
        raise OutDirError(f"{where}: cannot create {failed} ({exc.strerror or exc})") from None


LATEST = "latest"  # the output root's link to the newest run directory


def point_latest(run_dir: Path) -> str | None:
    """Point `<output root>/latest` at `run_dir` (replaced atomically: a reader sees the old or
    the new run, never neither). Returns a note when it cannot."""
    link = run_dir.parent / LATEST
    if link.exists() and not link.is_symlink():
        return f"{link} is not a link (left alone): `latest` does not name this run"
    temporary = run_dir.parent / f".{LATEST}.{os.getpid()}.{secrets.token_hex(3)}"
    try:
        os.symlink(run_dir.name, temporary)
        os.replace(temporary, link)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        return f"could not point {link} at this run ({exc.strerror or exc})"
    return None


# What the run's start and end write into a run that never started an attempt.
EMPTY_RUN_FILES = frozenset({"run.json", "report_summary.md", "report.html", "events.jsonl"})


def discard_empty_run(state: RunState) -> bool:
    """Remove a new run's directory that holds nothing an attempt wrote (nothing was selected,
    or the run stopped before its first attempt began): True when removed. A resumed run's
    directory, one with any attempt's files (`tasks/`, `events/`, `attempts.jsonl`) or with
    `report_error.txt`, or with anything else in it, is kept."""
    if state.resumed or not state.path.is_dir():
        return False
    names = {p.name for p in state.path.iterdir()}
    events = state.path / "events.jsonl"
    if names - EMPTY_RUN_FILES or (events.is_file() and events.stat().st_size):
        return False
    shutil.rmtree(state.path, ignore_errors=True)
    unmark_if_empty(state.path.parent)
    return not state.path.exists()
