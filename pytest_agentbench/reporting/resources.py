"""Resources as a treatment: the resource policy two runs ran under, compared before they are
paired, and the pass rate per resource scale of `report compare`.

The policy of an attempt is its record's `limits.cpu_limit`, `mem_limit_mb`, `mem_reservation_mb`,
`pids_limit` and `disk_limit_mb` (RESOURCE_COLUMNS): what its agent's and scoring sandboxes got,
after `--agentbench-resources-scale`. Two runs differ when a task that ran in both (not
TASK_INVALID, its attempts that ended in an infra error left out) has another value in one of
them; a value a record does not carry
(written before these fields) is unknown and never differs. `report paired`, `report compare`,
`gate` and `plan` refuse such runs with one line naming the first field that differs, unless
`--allow-resource-difference` (the pairing field `resources`) is given; then the reports say
which fields differed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pytest_agentbench.reporting.load import RESOURCE_COLUMNS, Run
from pytest_agentbench.reporting.names import ReportError

FIELD = "resources"  # the pairing field (`allow_mismatch`) that accepts a difference
FLAG = "--allow-resource-difference"
_NONE = -1.0  # a reservation the record says is not set
_SCALE = "limit_resources_scale"
_TASK_INVALID = "TASK_INVALID"


class ResourceDifference(ReportError):
    """Two runs ran under different resource policies: one line, naming the field."""


def _policy(frame: pd.DataFrame) -> pd.DataFrame:
    """Per task that ran (its first attempt's known value per field, infra errors left out: a
    record the controller wrote for a worker that died knows less), indexed by task id."""
    ran = frame[(frame["failure_reason"] != _TASK_INVALID) & ~frame["infra"].to_numpy(bool)]
    policy = ran[["task_id", *RESOURCE_COLUMNS, _SCALE]].groupby("task_id", sort=True).first()
    reserve = policy["limit_mem_reservation_mb"]
    # a record that has the policy fields and no reservation: none is set (not unknown)
    policy["limit_mem_reservation_mb"] = reserve.where(
        reserve.notna() | policy[_SCALE].isna(), _NONE)
    return policy.drop(columns=_SCALE)


def differences(a: Run, b: Run) -> list[dict[str, Any]]:
    """Each resource field that differs between the runs on some task both ran: the field
    (`limits.mem_limit_mb`), A's and B's values on the first such task (sorted by id), that task
    and how many tasks differ, out of how many compared."""
    pa, pb = _policy(a.attempts), _policy(b.attempts)
    ia, ib = pa.align(pb, join="inner", axis=0)
    out = []
    for column in RESOURCE_COLUMNS:
        va, vb = ia[column].to_numpy(dtype=float), ib[column].to_numpy(dtype=float)
        differs = ~np.isnan(va) & ~np.isnan(vb) & (va != vb)
        if not differs.any():
            continue
        first = int(np.flatnonzero(differs)[0])
        out.append({"field": "limits." + column.removeprefix("limit_"),
                    "a": _value(va[first]), "b": _value(vb[first]),
                    "task": str(ia.index[first]), "tasks": int(differs.sum()),
                    "compared": len(ia)})
    return out


def check(a: Run, b: Run, allowed: bool) -> list[dict[str, Any]]:
    """`differences(a, b)`; raises ResourceDifference (one line) when some differ and that is not
    `allowed`."""
    diffs = differences(a, b)
    if diffs and not allowed:
        raise ResourceDifference(refusal(diffs))
    return diffs


def refusal(diffs: list[dict[str, Any]]) -> str:
    first = diffs[0]
    more = [d["field"] for d in diffs[1:]]
    also = f" and in {', '.join(more)}" if more else ""
    return (f"runs differ in {first['field']} ({show(first['a'])} vs {show(first['b'])}"
            f"{_where(first)}){also}: pass {FLAG} to compare them")


def _where(d: dict[str, Any]) -> str:
    if d["tasks"] == d["compared"] == 1:
        return ""
    return f" on {d['tasks']} of {d['compared']} tasks, e.g. {d['task']}"


def describe(diffs: list[dict[str, Any]]) -> str:
    """The sentence a report shows when differences were allowed ("" when none)."""
    if not diffs:
        return ""
    parts = [f"{d['field']} {show(d['a'])} vs {show(d['b'])}{_where(d)}" for d in diffs]
    return (f"The runs were made under different resource policies, compared as asked ({FLAG}): "
            + "; ".join(parts) + ". A difference in pass rate may come from the resources.")


def show(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def _value(x: float) -> float | None:
    return None if x == _NONE else float(x)


# --- the policy of one run, for its summary -------------------------------------------------

def run_policy(frame: pd.DataFrame) -> dict[str, Any] | None:
    """What the run's attempts ran under, for its summary: per field (`limits.mem_limit_mb`)
    each value with the attempts that had it (most first; the reservation "none" when not set),
    the resource scale(s) and the OOM kills counted. None when no record carries the policy
    (written before these fields)."""
    known = frame[frame[_SCALE].notna()]
    if known.empty:
        return None
    fields = []
    for column in RESOURCE_COLUMNS:
        values = known[column].fillna(_NONE) if column == "limit_mem_reservation_mb" \
            else known[column].dropna()
        counts = values.value_counts(sort=True)
        fields.append({"field": "limits." + column.removeprefix("limit_"),
                       "values": [{"value": _value(float(v)), "attempts": int(n)}
                                  for v, n in counts.items()]})
    scales = known[_SCALE].value_counts(sort=True)
    return {"fields": fields,
            "resources_scale": [{"value": float(v), "attempts": int(n)}
                                for v, n in scales.items()],
            "oom_kills": int(known["limit_oom_kills"].fillna(0).sum()),
            "attempts": len(known)}


# --- sensitivity: the pass rate per scale ---------------------------------------------------

def scale_of(run: Run) -> float:
    """The run's resource scale, from its records (1.0 for records written before it)."""
    scales = run.attempts[_SCALE].dropna()
    return float(scales.mode().iloc[0]) if len(scales) else 1.0


def sensitivity(runs: Sequence[Run], scored: Sequence[np.ndarray]) -> list[dict[str, Any]]:
    """Per resource scale (ascending) among `runs`: the runs at it, their scored attempts and
    passes pooled, the pass rate with its Wilson 95% interval, the median CPU and memory limit
    applied, and the OOM kills; [] when every run has one scale. `scored` holds each run's
    scored-attempt mask."""
    from pytest_agentbench.reporting.stats import wilson_arrays

    scales = [scale_of(r) for r in runs]
    if len(set(scales)) < 2:
        return []
    rows = []
    for scale in sorted(set(scales)):
        members = [i for i, s in enumerate(scales) if s == scale]
        n = passed = 0
        cpu, mem, oom = [], [], 0.0
        for i in members:
            df, mask = runs[i].attempts, scored[i]
            n += int(mask.sum())
            passed += int((df["passed"].to_numpy(dtype=bool) & mask).sum())
            cpu.append(df["limit_cpu_limit"].to_numpy(dtype=float))
            mem.append(df["limit_mem_limit_mb"].to_numpy(dtype=float))
            oom += float(np.nansum(df["limit_oom_kills"].to_numpy(dtype=float)))
        low, high = wilson_arrays(np.array([passed]), np.array([n]))
        rows.append({"scale": scale, "runs": [runs[i].run_id for i in members], "scored": n,
                     "passed": passed, "pass_rate": passed / n if n else None,
                     "ci_low": _finite(low[0]), "ci_high": _finite(high[0]),
                     "cpu_limit_median": _median(cpu), "mem_limit_mb_median": _median(mem),
                     "oom_kills": int(oom)})
    return rows


def _median(parts: list[np.ndarray]) -> float | None:
    values = np.concatenate(parts) if parts else np.array([])
    values = values[~np.isnan(values)]
    return float(np.median(values)) if len(values) else None


def _finite(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None
