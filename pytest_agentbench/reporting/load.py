"""Read a run directory (`run.json` + `attempts.jsonl`) into one flat pandas DataFrame.

Speed matters (100k records in a couple of seconds): the whole file is parsed in one call by
pydantic-core against a flat TypedDict whose fields name the nested values they come from
(`AliasPath("result", "passed")`), so only those values ever become Python objects; the frame
is then built once. `full=False` skips the pairing-only fields (commit, image, limits, ...).
Full `AttemptRecord` validation of every record (`validate=True`) is optional: it costs more
than the whole report.

Each attempt gets exactly one `category`, by this precedence:
quarantined > flaky > invalid > infra > scored. Only `scored` attempts enter agent pass rates
(and `infra` too when infra errors are counted as failures).
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Required

import numpy as np
import pandas as pd
from pydantic import AliasPath, Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic needs it for TypedDict before 3.12

from pytest_agentbench.spec.taxonomy import BLAME, Reason

ATTEMPTS_FILE = "attempts.jsonl"
RUN_FILE = "run.json"
EVENTS_FILE = "events.jsonl"
PARALLEL_MIN_BYTES = 32 * 1024 * 1024
CATEGORIES = ("scored", "infra", "invalid", "flaky", "quarantined")


class ReportError(Exception):
    """Bad input for a report: missing or malformed run directory, refused pairing, ..."""


def _at(*path: str) -> Any:
    return Field(validation_alias=AliasPath(*path))


class _SummaryRecord(TypedDict, total=False):
    """The slice of `AttemptRecord` the summary reads, flattened; the rest is skipped."""

    run_id: Required[str]
    task_id: Required[str]
    suite: Required[str]
    variant: Required[str]
    attempt_index: Required[int]
    harness_version: Required[str]
    quarantined: str | None
    duration_sec: float
    passed: Required[Annotated[bool, _at("result", "passed")]]
    failure_reason: Annotated[str | None, _at("result", "failure_reason")]
    summary: Annotated[str, _at("result", "summary")]
    signature: Annotated[list[str], _at("result", "signature")]
    prompt_tokens: Annotated[int, _at("usage", "prompt_tokens")]
    completion_tokens: Annotated[int, _at("usage", "completion_tokens")]
    total_tokens: Annotated[int, _at("usage", "total_tokens")]
    cost_usd: Annotated[float | None, _at("usage", "cost_usd")]
    steps: Annotated[int, _at("agent", "steps")]
    is_flaky: Annotated[bool, _at("baseline_validation", "is_flaky")]
    task_dir: Annotated[str, _at("artifact_paths", "task_dir")]


class _Record(_SummaryRecord, total=False):
    """Plus what pairing and the HTML drill-down need."""

    attempt_id: Required[str]
    task_commit: Required[str]
    image_digest: Annotated[str | None, _at("image", "digest")]
    image_id: Annotated[str | None, _at("image", "id")]
    image_name: Annotated[str, _at("image", "name")]
    limits: dict[str, Any]
    started_at: Annotated[str, _at("timestamps", "started_at")]


COLUMNS = tuple(_Record.__annotations__)
_DEFAULTS: dict[str, Any] = {
    "quarantined": None, "duration_sec": 0.0, "failure_reason": None, "summary": "",
    "signature": None, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
    "cost_usd": np.nan, "steps": 0, "is_flaky": False, "task_dir": "", "attempt_id": "",
    "task_commit": "", "image_digest": None, "image_id": None, "image_name": "", "limits": None,
    "started_at": "",
}
_INTS = ("attempt_index", "prompt_tokens", "completion_tokens", "total_tokens", "steps")


@functools.cache
def _adapters(full: bool) -> tuple[TypeAdapter[Any], TypeAdapter[Any]]:
    record: Any = _Record if full else _SummaryRecord
    return TypeAdapter(record), TypeAdapter(list[record])


@dataclass(frozen=True)
class Run:
    """One run directory: its metadata, one row per attempt, and what was odd while loading."""

    path: Path
    meta: dict[str, Any]
    attempts: pd.DataFrame
    warnings: tuple[str, ...] = field(default=())

    def _from_records(self, column: str) -> str:
        values = self.attempts[column].unique() if len(self.attempts) else []
        return ",".join(sorted(str(v) for v in values))

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self._from_records("run_id") or self.path.name)

    @property
    def variant(self) -> str:
        return str(self.meta.get("variant") or self._from_records("variant"))

    @property
    def harness_version(self) -> str:
        """From the records (what actually ran), else from run.json."""
        return self._from_records("harness_version") or str(self.meta.get("harness_version", ""))


def load_run(run_dir: str | Path, validate: bool = False, full: bool = True) -> Run:
    """Load `run_dir`. Raises `ReportError` naming the file and record on malformed input.

    A truncated last line (a writer killed mid-line) is skipped with a warning; duplicate
    (task_id, attempt_index) rows keep the last one, with a warning (a resumed run).
    """
    path = Path(run_dir)
    if not path.is_dir():
        raise ReportError(f"{path}: not a run directory")
    meta = read_meta(path / RUN_FILE)
    attempts_path = path / ATTEMPTS_FILE
    if not attempts_path.is_file():
        raise ReportError(f"{attempts_path}: missing (no attempt was recorded in this run)")
    records, warnings = _read_jsonl(attempts_path, full)
    if validate:
        _validate(attempts_path)
    frame = records_to_frame(records, str(attempts_path))
    before = len(frame)
    frame = frame.drop_duplicates(["task_id", "attempt_index"], keep="last")
    frame = frame.reset_index(drop=True)
    if len(frame) < before:
        warnings.append(
            f"{before - len(frame)} duplicate (task_id, attempt_index) record(s); kept the last"
        )
    return Run(path=path, meta=meta, attempts=frame, warnings=tuple(warnings))


def load_runs(run_dirs: Sequence[str | Path], validate: bool = False,
              full: bool = True) -> list[Run]:
    """Load several runs; large ones in parallel (forked workers) when there are spare cores."""
    paths = [Path(d) for d in run_dirs]
    size = sum((p / ATTEMPTS_FILE).stat().st_size for p in paths if (p / ATTEMPTS_FILE).is_file())
    parallel = (len(paths) > 1 and size >= PARALLEL_MIN_BYTES and (os.cpu_count() or 1) > 1
                and "fork" in multiprocessing.get_all_start_methods())
    if not parallel:
        return [load_run(p, validate, full) for p in paths]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=len(paths) - 1, mp_context=context) as pool:
        futures = [pool.submit(load_run, p, validate, full) for p in paths[1:]]
        first = load_run(paths[0], validate, full)
        return [first] + [f.result() for f in futures]


def read_meta(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a JSON object")
    return data


def _read_jsonl(path: Path, full: bool = True) -> tuple[list[dict[str, Any]], list[str]]:
    """Parse the records, skipping blank lines and a truncated last line (with a warning).

    Fast path: the whole file as one JSON array in one pydantic-core call. On failure, lines are
    parsed one by one to name the bad record.
    """
    one, many = _adapters(full)
    lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
    warnings: list[str] = []
    if lines and not _is_json(lines[-1]):  # a writer killed mid-line
        warnings.append(f"{path}: truncated last line skipped")
        lines.pop()
    try:
        records: list[dict[str, Any]] = many.validate_json(b"[" + b",".join(lines) + b"]")
    except ValidationError:
        records = []
        for number, line in enumerate(lines, 1):
            try:
                records.append(one.validate_json(line))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise ReportError(f"{path}: record {number}: {where}: {first['msg']}") from exc
    return records, warnings


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


def canonical_limits(limits: pd.Series) -> pd.Series:
    """Order-insensitive text of each attempt's `limits` (computed once per distinct value)."""
    texts = [repr(d) for d in limits]
    canon: dict[str, str] = {}
    for text, d in zip(texts, limits, strict=True):
        if text not in canon:
            canon[text] = json.dumps(d if isinstance(d, dict) else {}, sort_keys=True)
    return pd.Series([canon[t] for t in texts], index=limits.index, dtype=object)


def records_to_frame(records: list[dict[str, Any]], source: str = "<records>") -> pd.DataFrame:
    """The report frame from flat records (as parsed above): defaults filled, types fixed."""
    frame = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    for name, default in _DEFAULTS.items():
        if default is not None and frame[name].isna().all():  # absent (e.g. not parsed)
            frame[name] = pd.Series([default] * len(frame), index=frame.index)
        elif default is not None:
            frame[name] = frame[name].fillna(default)
        else:
            frame[name] = frame[name].astype(object).where(frame[name].notna(), None)
    for name in _INTS:
        frame[name] = frame[name].astype(np.int64)
    frame["passed"] = frame["passed"].astype(bool)
    frame["is_flaky"] = frame["is_flaky"].astype(bool)
    frame["duration_sec"] = frame["duration_sec"].astype(float)
    frame["cost_usd"] = frame["cost_usd"].astype(float)
    digest, image_id = frame["image_digest"], frame["image_id"]
    frame["image"] = digest.where(digest.notna(), image_id.where(image_id.notna(),
                                                                 frame["image_name"]))
    return _derive(frame, source)


def _derive(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    reasons = frame["failure_reason"]
    known = {r.value: b for r, b in BLAME.items()}
    unknown = set(reasons.dropna().unique()) - set(known)
    if unknown:
        raise ReportError(f"{source}: unknown failure_reason(s): {sorted(map(str, unknown))}")
    blame = reasons.map(known)
    frame["blame"] = blame.astype(object).where(blame.notna(), None)
    quarantined = frame["quarantined"].notna()
    flaky = frame["is_flaky"] | (reasons == Reason.BASELINE_FLAKY.value)
    invalid = blame == "task"
    frame["task_invalid"] = invalid | flaky
    frame["infra"] = blame == "infra"
    frame["is_quarantined"] = quarantined
    category = np.select(
        [quarantined, flaky, invalid, frame["infra"]],
        ["quarantined", "flaky", "invalid", "infra"], default="scored",
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
        events.sort(key=lambda e: e["seq"] if isinstance(e.get("seq"), int) else 0)
    return out
