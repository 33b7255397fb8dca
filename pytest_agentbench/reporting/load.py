"""Read a run directory (`run.json` + `attempts.jsonl`) into one flat pandas DataFrame.

Speed matters (100k records in well under a few seconds): each line is parsed with `json.loads`
into a handful of column lists and the frame is built once. Pydantic validation of every record
(`validate=True`) is optional, because it costs more than the whole report.

Each attempt gets exactly one `category`, by this precedence:
quarantined > flaky > invalid > infra > scored. Only `scored` attempts enter agent pass rates
(and `infra` too when infra errors are counted as failures).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pytest_agentbench.spec.taxonomy import BLAME, Reason

ATTEMPTS_FILE = "attempts.jsonl"
RUN_FILE = "run.json"
EVENTS_FILE = "events.jsonl"

CATEGORIES = ("scored", "infra", "invalid", "flaky", "quarantined")
_STR_COLUMNS = (
    "run_id", "attempt_id", "task_id", "suite", "variant", "task_commit", "harness_version",
)


class ReportError(Exception):
    """Bad input for a report: missing or malformed run directory, refused pairing, ..."""


@dataclass(frozen=True)
class Run:
    """One run directory: its metadata, one row per attempt, and what was odd while loading."""

    path: Path
    meta: dict[str, Any]
    attempts: pd.DataFrame
    warnings: tuple[str, ...] = field(default=())

    @property
    def run_id(self) -> str:
        rid = self.meta.get("run_id")
        if rid:
            return str(rid)
        ids = self.attempts["run_id"].unique() if len(self.attempts) else []
        return str(ids[0]) if len(ids) == 1 else self.path.name

    @property
    def variant(self) -> str:
        var = self.meta.get("variant")
        if var:
            return str(var)
        vs = self.attempts["variant"].unique() if len(self.attempts) else []
        return ",".join(sorted(str(v) for v in vs))

    @property
    def harness_version(self) -> str:
        if len(self.attempts):
            return ",".join(sorted(str(v) for v in self.attempts["harness_version"].unique()))
        return str(self.meta.get("harness_version", ""))


def load_run(run_dir: str | Path, validate: bool = False) -> Run:
    """Load `run_dir`. Raises `ReportError` naming the file and line on malformed input.

    A truncated last line (a writer killed mid-line) is skipped with a warning; duplicate
    (task_id, attempt_index) rows keep the last one, with a warning (a resumed run).
    """
    path = Path(run_dir)
    if not path.is_dir():
        raise ReportError(f"{path}: not a run directory")
    meta = _read_meta(path / RUN_FILE)
    attempts_path = path / ATTEMPTS_FILE
    if not attempts_path.is_file():
        raise ReportError(f"{attempts_path}: missing (no attempt was recorded in this run)")
    records, warnings = _read_jsonl(attempts_path)
    if validate:
        _validate(records, attempts_path)
    frame = records_to_frame(records, str(attempts_path))
    before = len(frame)
    if before:
        frame = frame.drop_duplicates(["task_id", "attempt_index"], keep="last")
        frame = frame.reset_index(drop=True)
    if len(frame) < before:
        warnings.append(
            f"{before - len(frame)} duplicate (task_id, attempt_index) record(s); kept the last"
        )
    return Run(path=path, meta=meta, attempts=frame, warnings=tuple(warnings))


def _read_meta(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a JSON object")
    return data


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    data = path.read_bytes()
    lines = data.split(b"\n")
    records: list[dict[str, Any]] = []
    warnings: list[str] = []
    last = len(lines) - 1
    loads = json.loads
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = loads(line)
        except ValueError as exc:
            if number == last:  # no trailing newline: a partial write
                warnings.append(f"{path}:{number + 1}: truncated last line skipped")
                continue
            raise ReportError(f"{path}:{number + 1}: not valid JSON ({exc})") from exc
        if not isinstance(obj, dict):
            raise ReportError(f"{path}:{number + 1}: expected a JSON object")
        records.append(obj)
    return records, warnings


def _validate(records: list[dict[str, Any]], path: Path) -> None:
    from pydantic import ValidationError

    from pytest_agentbench.spec.records import AttemptRecord

    for number, rec in enumerate(records, 1):
        try:
            AttemptRecord.model_validate(rec)
        except ValidationError as exc:
            raise ReportError(f"{path}: record {number} is not a valid AttemptRecord:\n{exc}") \
                from exc


def _image_key(image: Any) -> str:
    if not isinstance(image, dict):
        return ""
    return str(image.get("digest") or image.get("id") or image.get("name") or "")


def records_to_frame(records: Iterable[dict[str, Any]], source: str = "<records>") -> pd.DataFrame:
    """Flatten attempt records (plain dicts) into the report frame, column by column."""
    cols: dict[str, list[Any]] = {name: [] for name in _STR_COLUMNS}
    extra: dict[str, list[Any]] = {name: [] for name in (
        "attempt_index", "quarantined", "duration_sec", "passed", "failure_reason", "summary",
        "signature", "steps", "prompt_tokens", "completion_tokens", "total_tokens", "cost_usd",
        "is_flaky", "image", "limits", "task_dir", "started_at",
    )}
    cols.update(extra)
    dumps = json.dumps
    for number, rec in enumerate(records, 1):
        try:
            for name in _STR_COLUMNS:
                cols[name].append(str(rec.get(name) or ""))
            cols["attempt_index"].append(int(rec.get("attempt_index") or 0))
            cols["quarantined"].append(rec.get("quarantined"))
            cols["duration_sec"].append(float(rec.get("duration_sec") or 0.0))
            result = rec["result"]
            cols["passed"].append(bool(result.get("passed")))
            cols["failure_reason"].append(result.get("failure_reason"))
            cols["summary"].append(result.get("summary") or "")
            cols["signature"].append("\n".join(result.get("signature") or ()))
            cols["steps"].append(int((rec.get("agent") or {}).get("steps") or 0))
            usage = rec.get("usage") or {}
            cols["prompt_tokens"].append(int(usage.get("prompt_tokens") or 0))
            cols["completion_tokens"].append(int(usage.get("completion_tokens") or 0))
            cols["total_tokens"].append(int(usage.get("total_tokens") or 0))
            cost = usage.get("cost_usd")
            cols["cost_usd"].append(np.nan if cost is None else float(cost))
            cols["is_flaky"].append(bool((rec.get("baseline_validation") or {}).get("is_flaky")))
            cols["image"].append(_image_key(rec.get("image")))
            cols["limits"].append(dumps(rec.get("limits") or {}, sort_keys=True))
            cols["task_dir"].append(str((rec.get("artifact_paths") or {}).get("task_dir") or ""))
            cols["started_at"].append(str((rec.get("timestamps") or {}).get("started_at") or ""))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ReportError(f"{source}: record {number} is malformed ({exc!r})") from exc
    frame = pd.DataFrame(cols)
    if frame.empty:
        frame = frame.astype({"passed": bool, "is_flaky": bool, "attempt_index": int})
    return _derive(frame, source)


def _derive(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    reasons = frame["failure_reason"]
    known = {r.value: b for r, b in BLAME.items()}
    unknown = set(reasons.dropna().unique()) - set(known)
    if unknown:
        raise ReportError(f"{source}: unknown failure_reason(s): {sorted(map(str, unknown))}")
    blame = reasons.map(known)
    frame["blame"] = blame.where(blame.notna(), None)
    quarantined = frame["quarantined"].notna()
    flaky = frame["is_flaky"] | (reasons == Reason.BASELINE_FLAKY.value)
    invalid = blame == "task"
    infra = blame == "infra"
    frame["task_invalid"] = invalid | flaky
    frame["infra"] = infra
    frame["is_quarantined"] = quarantined
    category = np.select(
        [quarantined, flaky, invalid, infra], ["quarantined", "flaky", "invalid", "infra"],
        default="scored",
    )
    frame["category"] = pd.Categorical(category, categories=CATEGORIES)
    return frame


def load_events(run_dir: str | Path, attempt_ids: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """Events of the given attempts from `<run_dir>/events.jsonl`, grouped by attempt, in order.

    Malformed lines are skipped: this feeds a viewer, not a statistic.
    """
    wanted = set(attempt_ids)
    out: dict[str, list[dict[str, Any]]] = {a: [] for a in wanted}
    path = Path(run_dir) / EVENTS_FILE
    if not path.is_file() or not wanted:
        return out
    with path.open("rb") as fh:
        for line in fh:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("attempt_id") in wanted:
                out[obj["attempt_id"]].append(obj)
    for events in out.values():
        events.sort(key=lambda e: (e.get("seq") if isinstance(e.get("seq"), int) else 0))
    return out
