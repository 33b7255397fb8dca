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
from typing import Any, cast

import numpy as np
import pandas as pd
from pydantic import TypeAdapter, ValidationError
from typing_extensions import Required, TypedDict

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
        _validate(attempts_path)
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


class _Result(TypedDict, total=False):
    passed: Required[bool]
    failure_reason: str | None
    summary: str
    signature: list[str]


class _Usage(TypedDict, total=False):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: float | None


class _Agent(TypedDict, total=False):
    steps: int


class _Baseline(TypedDict, total=False):
    is_flaky: bool


class _Image(TypedDict, total=False):
    name: str
    id: str | None
    digest: str | None


class _Timestamps(TypedDict, total=False):
    started_at: str


class _Record(TypedDict, total=False):
    """The slice of `AttemptRecord` the reports read; other keys are skipped by the parser."""

    run_id: Required[str]
    attempt_id: Required[str]
    task_id: Required[str]
    suite: Required[str]
    variant: Required[str]
    attempt_index: Required[int]
    task_commit: Required[str]
    harness_version: Required[str]
    quarantined: str | None
    duration_sec: float
    result: Required[_Result]
    usage: _Usage | None
    agent: _Agent
    baseline_validation: _Baseline
    image: _Image | None
    limits: dict[str, Any]
    artifact_paths: dict[str, str]
    timestamps: _Timestamps


_ONE = TypeAdapter(_Record)
_MANY = TypeAdapter(list[_Record])


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Parse the records, skipping blank lines and a truncated last line (with a warning).

    Fast path: the whole file as one JSON array through pydantic-core, which materialises only
    the fields of `_Record`. On failure, lines are parsed one by one to name the bad one.
    """
    lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
    warnings: list[str] = []
    if lines:
        try:
            _ONE.validate_json(lines[-1])
        except ValidationError:
            if not _is_json(lines[-1]):  # a writer killed mid-line
                warnings.append(f"{path}: truncated last line skipped")
                lines.pop()
    try:
        records = _MANY.validate_json(b"[" + b",".join(lines) + b"]")
    except ValidationError:
        records = []
        for number, line in enumerate(lines, 1):
            try:
                records.append(_ONE.validate_json(line))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise ReportError(f"{path}: record {number}: {where}: {first['msg']}") from exc
    return cast(list[dict[str, Any]], records), warnings


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _validate(path: Path) -> None:
    """Full pydantic validation of every record (slow; a truncated last line is tolerated)."""
    from pytest_agentbench.spec.records import AttemptRecord

    lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
    for number, line in enumerate(lines, 1):
        try:
            AttemptRecord.model_validate_json(line)
        except ValidationError as exc:
            if number == len(lines) and not _is_json(line):
                continue
            raise ReportError(f"{path}: record {number} is not a valid AttemptRecord:\n{exc}") \
                from exc


def _image_key(image: Any) -> str:
    if not isinstance(image, dict):
        return ""
    return str(image.get("digest") or image.get("id") or image.get("name") or "")


def canonical_limits(limits: pd.Series) -> pd.Series:
    """Order-insensitive text of each attempt's `limits` (computed once per distinct value)."""
    texts = [repr(d) for d in limits]
    canon: dict[str, str] = {}
    for text, d in zip(texts, limits, strict=True):
        if text not in canon:
            canon[text] = json.dumps(d or {}, sort_keys=True)
    return pd.Series([canon[t] for t in texts], index=limits.index, dtype=object)


def _sub(frame: pd.DataFrame, column: str, fields: dict[str, Any]) -> pd.DataFrame:
    """Flatten a column of (possibly missing) dicts into `fields`, with defaults."""
    values = [v if isinstance(v, dict) else {} for v in frame[column]] if column in frame \
        else [{}] * len(frame)
    sub = pd.DataFrame.from_records(values, columns=list(fields), index=frame.index)
    for name, default in fields.items():
        if default is not None:
            sub[name] = sub[name].fillna(default)
    return sub


def records_to_frame(records: list[dict[str, Any]], source: str = "<records>") -> pd.DataFrame:
    """Flatten attempt records (plain dicts) into the report frame, column by column."""
    raw = pd.DataFrame.from_records(records, columns=list(_Record.__annotations__))
    result = _sub(raw, "result", {"passed": False, "failure_reason": None, "summary": "",
                                  "signature": None})
    usage = _sub(raw, "usage", {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
                                "cost_usd": None})
    frame = pd.DataFrame({name: raw[name].fillna("").astype(str) for name in _STR_COLUMNS})
    frame["attempt_index"] = raw["attempt_index"].fillna(0).astype(np.int64)
    frame["quarantined"] = raw["quarantined"].where(raw["quarantined"].notna(), None)
    frame["duration_sec"] = raw["duration_sec"].astype(float).fillna(0.0)
    frame["passed"] = result["passed"].astype(bool)
    frame["failure_reason"] = result["failure_reason"].where(result["failure_reason"].notna(),
                                                             None)
    frame["summary"] = result["summary"].astype(str)
    frame["signature_list"] = result["signature"]
    frame["steps"] = _sub(raw, "agent", {"steps": 0})["steps"].astype(np.int64)
    for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
        frame[name] = usage[name].astype(np.int64)
    frame["cost_usd"] = usage["cost_usd"].astype(float)
    frame["is_flaky"] = _sub(raw, "baseline_validation", {"is_flaky": False})["is_flaky"] \
        .astype(bool)
    frame["image"] = [_image_key(v) for v in raw["image"]]
    frame["limits_raw"] = raw["limits"]
    frame["task_dir"] = _sub(raw, "artifact_paths", {"task_dir": ""})["task_dir"].astype(str)
    frame["started_at"] = _sub(raw, "timestamps", {"started_at": ""})["started_at"].astype(str)
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
