"""Read a run directory (`run.json` + `attempts.jsonl`) into one flat pandas DataFrame.

Speed matters (100k records: about 2 s to parse, a tenth of that from the cache). The records
are parsed by record_parse.py (pydantic-core against flat TypedDicts, so only the values a
report reads become Python objects) and the frame is built once; `fields` names what to parse:
"summary", "pairing" or "all". The finished frame is cached next to attempts.jsonl
(frame_cache.py) and reused while that file is unchanged, so a warm load imports no pydantic.
Full `AttemptRecord` validation of every record (`validate=True`) is optional: it costs more
than the whole report.

Engines: `engine` is the record's (the engine its last try ran on; None for the
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
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import pytest_agentbench.reporting.frame_cache as frame_cache
from pytest_agentbench.reporting.names import (  # re-exported: load's names since the start
    ATTEMPTS_FILE as ATTEMPTS_FILE,
)
from pytest_agentbench.reporting.names import EVENTS_FILE as EVENTS_FILE
from pytest_agentbench.reporting.names import RUN_FILE as RUN_FILE
from pytest_agentbench.reporting.names import Fields as Fields
from pytest_agentbench.reporting.names import ReportError as ReportError
from pytest_agentbench.reporting.names import read_meta as read_meta
from pytest_agentbench.schemas.taxonomy import BLAME, FLAKY_REASONS

CATEGORIES = ("scored", "infra", "invalid", "flaky", "quarantined")
PROFILES = ("summary", "pairing", "all")

_DEFAULTS: dict[str, Any] = {
    "quarantined": None, "duration_sec": 0.0, "failure_reason": None, "summary": "",
    "signature": None, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0,
    "cost_usd": np.nan, "steps": 0, "is_flaky": False, "task_dir": "", "attempt_id": "",
    "task_commit": "", "image_digest": None, "image_id": None, "image_name": "",
    "started_at": "", "limit_timeout_sec": np.nan, "limit_tool_timeout_sec": np.nan,
    "limit_max_steps": np.nan, "limit_cpu_limit": np.nan, "limit_mem_limit_mb": np.nan,
    "limit_budgets": None, "engine": None, "retried": None, "limit_pids_limit": np.nan,
    "limit_disk_limit_mb": np.nan, "limit_mem_reservation_mb": np.nan,
    "limit_resources_scale": np.nan, "limit_oom_kills": np.nan,
}
# the `limits` pairing field (budgets and timeouts), flattened: budgets as order-insensitive
# JSON text
LIMIT_COLUMNS = ("limit_timeout_sec", "limit_tool_timeout_sec", "limit_max_steps",
                 "limit_budgets")
# the resource policy (`resources`, a pairing field of its own): NaN is unknown (a record
# written before the field), except the reservation, where it is also "none set"
RESOURCE_COLUMNS = ("limit_cpu_limit", "limit_mem_limit_mb", "limit_mem_reservation_mb",
                    "limit_pids_limit", "limit_disk_limit_mb")
_INTS = ("attempt_index", "prompt_tokens", "completion_tokens", "total_tokens", "steps")
_DERIVED = ("image", "retry_engines", "infra_retries", "blame", "task_invalid", "infra",
            "is_quarantined", "category")
_FLOATS = ("duration_sec", "cost_usd", *LIMIT_COLUMNS[:-1], *RESOURCE_COLUMNS,
           "limit_resources_scale", "limit_oom_kills")
_BOOLS = ("passed", "is_flaky", "task_invalid", "infra", "is_quarantined")
# every column of a loaded frame, whatever `fields` parsed (the rest hold defaults), with its
# dtype (repr); None: text or objects (object or str dtype, as pandas infers it)
FRAME_COLUMNS: dict[str, str | None] = {
    name: None for name in ("run_id", "task_id", "suite", "variant", "harness_version",
                            *_DEFAULTS, *_DERIVED)}
FRAME_COLUMNS.update({name: repr(np.dtype(np.int64)) for name in (*_INTS, "infra_retries")})
FRAME_COLUMNS.update({name: repr(np.dtype(np.float64)) for name in _FLOATS})
FRAME_COLUMNS.update({name: repr(np.dtype(bool)) for name in _BOOLS})
FRAME_COLUMNS["category"] = repr(pd.CategoricalDtype(CATEGORIES))
# attempts.jsonl smaller than this is parsed every time (a few ms; no cache file for it)
CACHE_MIN_BYTES = 1 << 20
# what makes a cached frame: these modules' source, the libraries building the frame
_LOADER_SOURCES = ("load.py", "record_parse.py", "frame_cache.py", "frame_codec.py",
                   "../schemas/taxonomy.py")


def __getattr__(name: str) -> Any:
    """The parser's names, once here (`COLUMNS`, `_adapter`), without importing pydantic
    until they are asked for."""
    if name in ("COLUMNS", "_adapter"):
        import pytest_agentbench.reporting.record_parse as record_parse

        return getattr(record_parse, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def load_run(run_dir: str | Path, validate: bool = False, fields: Fields = "all",
             cache: bool = True) -> Run:
    """Load `run_dir`. Raises `ReportError` naming the file and record on malformed input.

    `fields` picks what is parsed: "summary", "pairing" (commit, image, limits) or "all"
    (both, plus attempt ids for the HTML drill-down); columns not parsed hold defaults.
    A truncated last line (a writer killed mid-line) is skipped with a warning; duplicate
    (task_id, attempt_index) rows keep the last one, with a warning (a resumed run).
    `cache=False` neither reads nor writes the frame cache (frame_cache.py).
    """
    if fields not in PROFILES:
        raise ValueError(f"fields must be one of {sorted(PROFILES)}, got {fields!r}")
    path = Path(run_dir)
    if not path.is_dir():
        raise ReportError(f"{path}: not a run directory")
    meta = read_meta(path / RUN_FILE)
    attempts_path = path / ATTEMPTS_FILE
    if not attempts_path.is_file():
        raise ReportError(f"{attempts_path}: missing (no attempt was recorded in this run)")
    if validate:
        from pytest_agentbench.reporting.record_parse import validate_file

        validate_file(attempts_path)
    frame, info = _load_attempts(attempts_path, fields, cache)
    warnings = []
    if info.get("truncated"):
        warnings.append(f"{attempts_path}: truncated last line skipped")
    if info.get("duplicates"):
        warnings.append(f"{info['duplicates']} duplicate (task_id, attempt_index) record(s); "
                        "kept the last")
    return Run(path=path, meta=meta, attempts=frame, warnings=tuple(warnings))


def _load_attempts(path: Path, fields: str, cache: bool) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The frame of attempts.jsonl and facts for the warnings: from the cache when it was made
    from this very file, else parsed (and then cached when the file did not change meanwhile)."""
    with path.open("rb") as fh:
        st = os.fstat(fh.fileno())
        cache = cache and st.st_size >= CACHE_MIN_BYTES
        if cache:
            key = {**frame_cache.key_of_open_file(fh), **_loader_key(fields)}
            hit = frame_cache.read(path, fields, key, FRAME_COLUMNS, owner_uid=st.st_uid)
            if hit is not None and _load_info(hit[1]):
                return hit
        data = fh.read()
        st = os.fstat(fh.fileno())
    frame, info = _parse(data, path, fields)
    if cache:
        key_now = frame_cache.key_of_data(st, data)
        if key_now is not None:
            frame_cache.write(path, fields, {**key_now, **_loader_key(fields)}, frame, info)
    return frame, info


def _parse(data: bytes, path: Path, fields: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    from pytest_agentbench.reporting.record_parse import parse_jsonl

    with paused_gc():  # 100k fresh dicts would trigger many full collections: ~20% of the load
        records, truncated = parse_jsonl(data, path, fields)
        frame = records_to_frame(records, str(path), fields)
        del records
    before = len(frame)
    frame = frame.drop_duplicates(["task_id", "attempt_index"], keep="last")
    frame = frame.reset_index(drop=True)
    return frame, {"truncated": truncated, "duplicates": before - len(frame)}


def _load_info(info: dict[str, Any]) -> bool:
    """A cached `info` is what `_parse` writes."""
    return set(info) == {"truncated", "duplicates"} and type(info["truncated"]) is bool \
        and type(info["duplicates"]) is int and info["duplicates"] >= 0


@functools.cache
def _loader_fingerprint() -> str:
    """What a cached frame was made by: the loader's source and the pandas and numpy versions."""
    import pytest_agentbench

    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in _LOADER_SOURCES:
        try:
            digest.update((here / name).read_bytes())
        except OSError:  # no source (a frozen install): the version stands in for it
            digest.update(name.encode())
    for part in (getattr(pytest_agentbench, "__version__", ""), pd.__version__, np.__version__):
        digest.update(str(part).encode() + b"\0")
    return digest.hexdigest()


def _loader_key(fields: str) -> dict[str, Any]:
    return {"fields": fields, "loader": _loader_fingerprint()}


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused for the block (building many small objects that make
    no cycles sets it off again and again), then as it was."""
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
    from pytest_agentbench.reporting.record_parse import profile_columns

    parsed = profile_columns(fields)
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
    for name, kind in (("passed", bool), ("is_flaky", bool), *((f, float) for f in _FLOATS)):
        if frame[name].dtype != kind:  # a column of None only (older records) is an object one
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
