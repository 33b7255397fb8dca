"""Parse `attempts.jsonl` lines into flat dicts: the loader's pydantic half.

Each line is parsed by pydantic-core against a flat TypedDict whose fields name the nested
values they come from (`AliasPath("result", "passed")`), so only those values ever become
Python objects. `fields` names what to parse: "summary", "pairing" or "all".

Kept apart from load.py so that a report served from the frame cache (frame_cache.py) never
imports pydantic (about 0.3 s of a cold process).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated, Any, Required

from pydantic import AliasPath, Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic needs it for TypedDict before 3.12

from pytest_agentbench.reporting.names import ReportError


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


class _Resources(TypedDict, total=False):
    """The resource policy an attempt ran under (reporting/resources.py): a pairing field, and
    a section of the run's summary."""

    limit_cpu_limit: Annotated[float, _at("limits", "cpu_limit")]
    limit_mem_limit_mb: Annotated[float, _at("limits", "mem_limit_mb")]
    limit_pids_limit: Annotated[float | None, _at("limits", "pids_limit")]
    limit_disk_limit_mb: Annotated[float | None, _at("limits", "disk_limit_mb")]
    limit_mem_reservation_mb: Annotated[float | None, _at("limits", "mem_reservation_mb")]
    limit_resources_scale: Annotated[float | None, _at("limits", "resources_scale")]
    limit_oom_kills: Annotated[float | None, _at("limits", "oom_kills")]


class _Summary(_Base, _Resources, total=False):
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


class _Pairing(_Base, _Resources, total=False):
    task_commit: Required[str]
    image_digest: Annotated[str | None, _at("image", "digest")]
    image_id: Annotated[str | None, _at("image", "id")]
    image_name: Annotated[str, _at("image", "name")]
    limit_timeout_sec: Annotated[float, _at("limits", "timeout_sec")]
    limit_tool_timeout_sec: Annotated[float, _at("limits", "tool_timeout_sec")]
    limit_max_steps: Annotated[float, _at("limits", "max_steps")]
    limit_budgets: Annotated[dict[str, Any], _at("limits", "budgets")]


class _All(_Summary, _Pairing, total=False):
    attempt_id: Required[str]
    started_at: Annotated[str, _at("timestamps", "started_at")]


_PROFILES: dict[str, Any] = {"summary": _Summary, "pairing": _Pairing, "all": _All}
COLUMNS = tuple(_All.__annotations__)


def profile_columns(fields: str) -> list[str]:
    """The columns `fields` parses, in the frame's order."""
    return list(_PROFILES[fields].__annotations__)


@functools.cache
def _adapter(fields: str) -> TypeAdapter[Any]:
    if fields not in _PROFILES:
        raise ValueError(f"fields must be one of {sorted(_PROFILES)}, got {fields!r}")
    return TypeAdapter(_PROFILES[fields])


def parse_jsonl(data: bytes, path: Path | str, fields: str = "all"
                ) -> tuple[list[dict[str, Any]], bool]:
    """Parse the records of `data` (a file's bytes), skipping blank lines and a truncated last
    line; returns the records and whether a last line was skipped.

    One pydantic-core call per line (measured faster than one call on the whole file as an
    array: the parser's working set stays in cache). If a line fails, the lines are walked
    again to skip blank ones and name the bad record.
    """
    body = data.rstrip()
    truncated = False
    cut = body.rfind(b"\n")
    if body and not is_json(body[cut + 1:]):  # a writer killed mid-line
        truncated = True
        body = body[:max(cut, 0)].rstrip()
    if not body:
        return [], truncated
    lines = body.split(b"\n")
    validate = _adapter(fields).validate_json
    try:
        return [validate(line) for line in lines], truncated
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
    return records, truncated


def is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def validate_file(path: Path) -> None:
    """Full pydantic validation of every record (slow; a truncated last line is tolerated)."""
    from pytest_agentbench.schemas.records import AttemptRecord

    lines = [line for line in path.read_bytes().split(b"\n") if line.strip()]
    for number, line in enumerate(lines, 1):
        try:
            AttemptRecord.model_validate_json(line)
        except ValidationError as exc:
            if number == len(lines) and not is_json(line):
                continue
            raise ReportError(f"{path}: record {number} is not a valid AttemptRecord:\n{exc}") \
                from exc
