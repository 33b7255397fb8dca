"""Read a run directory (`run.json` + `attempts.jsonl`) into one flat pandas DataFrame.

Speed matters (100k records in a couple of seconds): each line is parsed by pydantic-core
against a flat TypedDict whose fields name the nested values they come from
(`AliasPath("result", "passed")`), so only those values ever become Python objects; the frame
is then built once. `fields` names what to parse: "summary", "pairing" or "all".
Full `AttemptRecord` validation of every record (`validate=True`) is optional: it costs more
than the whole report.

Engines (issue 12): `engine` is the record's (the engine its last try ran on; None for the
local sandbox and older records); `retried` the earlier tries set aside after an infra error, as
a tuple (empty when the attempt ran once), with `infra_retries` (their number) and
`retry_engines` (their engines, oldest first) derived. A retried attempt is still one row.

Each attempt gets exactly one `category`, by this precedence:
quarantined > flaky > invalid > infra > scored. Only `scored` attempts enter agent pass rates
(and `infra` too when infra errors are counted as failures).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Required

import numpy as np
import pandas as pd
from pydantic import AliasPath, Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic needs it for TypedDict before 3.12

from pytest_agentbench.reporting.names import (  # re-exported: load's names since the start
    ATTEMPTS_FILE as ATTEMPTS_FILE,
)
from pytest_agentbench.reporting.names import EVENTS_FILE as EVENTS_FILE
from pytest_agentbench.reporting.names import RUN_FILE as RUN_FILE
from pytest_agentbench.reporting.names import Fields as Fields
from pytest_agentbench.reporting.names import ReportError as ReportError
from pytest_agentbench.schemas.taxonomy import BLAME, FLAKY_REASONS

CATEGORIES = ("scored", "infra", "invalid", "flaky", "quarantined")


def _at(*path: str) -> Any:
    return Field(validation_alias=AliasPath(*path))


class _Base(TypedDict, total=False):
    """What every report reads (identity and category), flattened; other keys are skipped."""

    run_id: Required[str]
    task_id: Required[str]
    suite: Required[str]
    variant: Required[str]
    attempt_index: Required[int]
    harness_version: Required[str]
    quarantined: str | None
    passed: Required[Annotated[bool, _at("result", "passed")]]
    failure_reason: Annotated[str | None, _at("result", "failure_reason")]
    is_flaky: Annotated[bool, _at("baseline_validation", "is_flaky")]


class _Try(TypedDict, total=False):
    """An earlier try of an attempt (`retried`), set aside after an infra error."""

    engine: str
    failure_reason: str
    sub_reason: str | None
    duration_sec: float
    artifacts_dir: str | None


class _Summary(_Base, total=False):
    duration_sec: float
    summary: Annotated[str, _at("result", "summary")]
    signature: Annotated[list[str], _at("result", "signature")]
    prompt_tokens: Annotated[int, _at("usage", "prompt_tokens")]
    completion_tokens: Annotated[int, _at("usage", "completion_tokens")]
    total_tokens: Annotated[int, _at("usage", "total_tokens")]
    cost_usd: Annotated[float | None, _at("usage", "cost_usd")]
    steps: Annotated[int, _at("agent", "steps")]
    task_dir: Annotated[str, _at("artifact_paths", "task_dir")]
    engine: str | None
    retried: list[_Try]


class _Pairing(_Base, total=False):
    task_commit: Required[str]
    image_digest: Annotated[str | None, _at("image", "digest")]
    image_id: Annotated[str | None, _at("image", "id")]
    image_name: Annotated[str, _at("image", "name")]
    limit_timeout_sec: Annotated[float, _at("limits", "timeout_sec")]
    limit_tool_timeout_sec: Annotated[float, _at("limits", "tool_timeout_sec")]
    limit_max_steps: Annotated[float, _at("limits", "max_steps")]
    limit_cpu_limit: Annotated[float, _at("limits", "cpu_limit")]
    limit_mem_limit_mb: Annotated[float, _at("limits", "mem_limit_mb")]
    limit_budgets: Annotated[dict[str, Any], _at("limits", "budgets")]


class _All(_Summary, _Pairing, total=False):
    attempt_id: Required[str]
    started_at: Annotated[str, _at("timestamps", "started_at")]


_PROFILES: dict[str, Any] = {"summary": _Summary, "pairing": _Pairing, "all": _All}
COLUMNS = tuple(_All.__annotations__)
_DEFAULTS: dict[str, Any] = {
    "quarantined": None, "duration_sec": 0.0, "failure_reason": None, "summary": "",
    "signature": None, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
    "cost_usd": np.nan, "steps": 0, "is_flaky": False, "task_dir": "", "attempt_id": "",
    "task_commit": "", "image_digest": None, "image_id": None, "image_name": "",
    "started_at": "", "limit_timeout_sec": np.nan, "limit_tool_timeout_sec": np.nan,
    "limit_max_steps": np.nan, "limit_cpu_limit": np.nan, "limit_mem_limit_mb": np.nan,
    "limit_budgets": None, "engine": None, "retried": None,
}
# `limits` (budgets and timeouts), flattened: budgets as order-insensitive JSON text
LIMIT_COLUMNS = ("limit_timeout_sec", "limit_tool_timeout_sec", "limit_max_steps",
                 "limit_cpu_limit", "limit_mem_limit_mb", "limit_budgets")
_INTS = ("attempt_index", "prompt_tokens", "completion_tokens", "total_tokens", "steps")


@functools.cache
def _adapter(fields: str) -> TypeAdapter[Any]:
    if fields not in _PROFILES:
        raise ValueError(f"fields must be one of {sorted(_PROFILES)}, got {fields!r}")
    return TypeAdapter(_PROFILES[fields])


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


def load_run(run_dir: str | Path, validate: bool = False, fields: Fields = "all") -> Run:
    """Load `run_dir`. Raises `ReportError` naming the file and record on malformed input.

    `fields` picks what is parsed: "summary", "pairing" (commit, image, limits) or "all"
    (both, plus attempt ids for the HTML drill-down); columns not parsed hold defaults.
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
    if validate:
        _validate(attempts_path)
    with _no_gc():  # 100k fresh dicts would trigger many full collections: ~20% of the load
        records, warnings = _read_jsonl(attempts_path, fields)
        frame = records_to_frame(records, str(attempts_path), fields)
        del records
    before = len(frame)
    frame = frame.drop_duplicates(["task_id", "attempt_index"], keep="last")
    frame = frame.reset_index(drop=True)
    if len(frame) < before:
        warnings.append(
            f"{before - len(frame)} duplicate (task_id, attempt_index) record(s); kept the last"
        )
    return Run(path=path, meta=meta, attempts=frame, warnings=tuple(warnings))


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_runs(run_dirs: Sequence[str | Path], validate: bool = False,
              fields: Fields = "pairing") -> list[Run]:
    """Load several runs (sequentially: forked loaders measured slower on this 2-core box)."""
    return [load_run(p, validate, fields) for p in run_dirs]


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


def _read_jsonl(path: Path, fields: str = "all") -> tuple[list[dict[str, Any]], list[str]]:
    """Parse the records, skipping blank lines and a truncated last line (with a warning).

    One pydantic-core call per line (measured faster than one call on the whole file as an
    array: the parser's working set stays in cache). If a line fails, the lines are walked
    again to skip blank ones and name the bad record.
    """
    body = path.read_bytes().rstrip()
    warnings: list[str] = []
    cut = body.rfind(b"\n")
    if body and not _is_json(body[cut + 1:]):  # a writer killed mid-line
        warnings.append(f"{path}: truncated last line skipped")
        body = body[:max(cut, 0)].rstrip()
    if not body:
        return [], warnings
    lines = body.split(b"\n")
    validate = _adapter(fields).validate_json
    try:
        return [validate(line) for line in lines], warnings
    except ValidationError:
        pass
    records = []
    for number, line in enumerate((ln for ln in lines if ln.strip()), 1):
        try:
            records.append(validate(line))
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
    from pytest_agentbench.schemas.records import AttemptRecord

    lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
    for number, line in enumerate(lines, 1):
        try:
            AttemptRecord.model_validate_json(line)
        except ValidationError as exc:
            if number == len(lines) and not _is_json(line):
                continue
            raise ReportError(f"{path}: record {number} is not a valid AttemptRecord:\n{exc}") \
                from exc


def _canonical_json(values: pd.Series) -> pd.Series:
    """Order-insensitive JSON text of each dict (computed once per distinct repr)."""
    texts = [repr(d) for d in values]
    canon: dict[str, str] = {}
    for text, d in zip(texts, values, strict=True):
        if text not in canon:
            canon[text] = json.dumps(d, sort_keys=True) if isinstance(d, dict) else ""
    return pd.Series([canon[t] for t in texts], index=values.index, dtype=object)


def records_to_frame(records: list[dict[str, Any]], source: str = "<records>",
                     fields: str = "all") -> pd.DataFrame:
    """The report frame from flat records (as parsed above): defaults filled, types fixed.

    Columns outside the `fields` profile are constant defaults (cheap scalar broadcast).
    """
    parsed = list(_PROFILES[fields].__annotations__)
    frame = pd.DataFrame.from_records(records, columns=parsed)
    for name, default in _DEFAULTS.items():
        if name not in frame:
            frame[name] = default
        elif isinstance(default, str) and frame[name].dtype != object:
            # all missing (a run of invalid tasks has no task_dir): a float column of NaN,
            # which pandas will not fill with text (a warning now, an error in pandas 4)
            frame[name] = frame[name].astype(object).fillna(default)
        elif default is not None:
            frame[name] = frame[name].fillna(default)
        else:
            frame[name] = frame[name].astype(object).where(frame[name].notna(), None)
    for name in _INTS:
        frame[name] = frame[name].astype(np.int64)
    for name, kind in (("passed", bool), ("is_flaky", bool), ("duration_sec", float),
                       ("cost_usd", float)):
        frame[name] = frame[name].astype(kind)
    if "limit_budgets" in parsed:
        frame["limit_budgets"] = _canonical_json(frame["limit_budgets"])
    digest, image_id = frame["image_digest"], frame["image_id"]
    frame["image"] = digest.where(digest.notna(), image_id.where(image_id.notna(),
                                                                 frame["image_name"]))
    _retries(frame)
    return _derive(frame, source)


def _retries(frame: pd.DataFrame) -> None:
    """`retried` as a tuple of tries per attempt (empty when it ran once, or in records written
    before infra retries), `infra_retries` their number, `retry_engines` their engines, oldest
    first. The attempt itself (its one row) is its last try."""
    n = len(frame)
    tries = np.empty(n, dtype=object)
    engines = np.empty(n, dtype=object)
    counts = np.zeros(n, dtype=np.int64)
    empty: tuple[Any, ...] = ()
    for i, value in enumerate(frame["retried"].to_numpy(dtype=object)):
        if isinstance(value, list) and value:
            tries[i] = tuple(value)
            engines[i] = tuple(str(t.get("engine") or "") for t in value)
            counts[i] = len(value)
        else:
            tries[i] = engines[i] = empty
    frame["retried"] = tries
    frame["retry_engines"] = engines
    frame["infra_retries"] = counts


def _derive(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    reasons = frame["failure_reason"]
    known = {r.value: b for r, b in BLAME.items()}
    unknown = set(reasons.dropna().unique()) - set(known)
    if unknown:
        raise ReportError(f"{source}: unknown failure_reason(s): {sorted(map(str, unknown))}")
    blame = reasons.map(known)
    frame["blame"] = blame.astype(object).where(blame.notna(), None)
    quarantined = frame["quarantined"].notna()
    flaky = frame["is_flaky"] | reasons.isin([r.value for r in FLAKY_REASONS])
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
