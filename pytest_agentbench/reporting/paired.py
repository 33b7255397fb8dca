"""Paired comparison of two runs (A = baseline, B = variant) over the same tasks.

Pairing: attempts are joined on (task_id, attempt_index), so attempt i of a task in A is paired
with attempt i of the same task in B. Before any number is computed the invariants are checked:
same task id set, same task commit, image, limits
(budgets and timeouts) per task, same harness version. A mismatch is refused with a message that
lists what differs, unless that field is allowed (`allow_mismatch`); missing tasks or attempts
are refused unless `missing="skip"`. First of all, the resource policy (CPU, memory, pids, disk
limits; reporting/resources.py): runs that differ in it are refused with one line naming the
field, unless `resources` is allowed (`--allow-resource-difference`); then
`pairing.resource_differences` lists what differed.

A task whose spec failed validation in either run (TASK_INVALID: one record, no commit) is
exempt from the field and attempt checks: it never ran there, and it is dropped as invalid.

Beside these attempt-level numbers, `data["task_level"]` compares per-task pass rates over every
scored attempt and `data["power"]` gives the minimum detectable effect (paired_tasks.py).

Exclusion rule, applied in this order and each counted in the report:
1. a task is dropped if it is invalid (blame "task") or flaky in either run, on any attempt;
2. a pair is dropped if either attempt is quarantined;
3. a pair is dropped if either attempt ended in an infra error (SANDBOX_ERROR, LLM_ERROR), unless
   `infra_as_failure`, in which case such an attempt counts as a failure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

import pytest_agentbench.reporting.paired_tasks as paired_tasks
import pytest_agentbench.reporting.resources as resources
import pytest_agentbench.reporting.stats as stats
from pytest_agentbench.reporting.load import LIMIT_COLUMNS, ReportError, Run
from pytest_agentbench.schemas.taxonomy import Reason

SCHEMA_VERSION = 1
CHECKED_FIELDS = ("task_commit", "image", "limits", "harness_version")
MISMATCH_FIELDS = frozenset((*CHECKED_FIELDS, resources.FIELD))
Method = Literal["mcnemar", "bootstrap"]
Missing = Literal["skip", "fail"]
_EXAMPLES = 5
TASK_INVALID = Reason.TASK_INVALID.value


class PairingError(ReportError):
    """The runs cannot be paired as they are; `problems` lists every difference found."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        text = "\n".join(f"  - {p}" for p in problems)
        hint = ("(pass --allow-mismatch FIELD to accept a field's difference, "
                "--missing skip to drop unpaired tasks)")
        super().__init__(f"refusing to pair these runs:\n{text}\n{hint}")


@dataclass
class Pairing:
    """The joined pairs (one row per paired attempt) and the bookkeeping of how they were made."""

    pairs: pd.DataFrame  # task_id, attempt_index, suite, a_passed, b_passed
    info: dict[str, Any]
    exclusions: dict[str, Any]


@dataclass
class PairedReport:
    data: dict[str, Any]
    pairs: pd.DataFrame
    distribution: np.ndarray  # bootstrap replicates of B - A


def _show(values: list[str]) -> str:
    text = ",".join(sorted(values)) or "(none)"
    return text if len(text) <= 80 else text[:77] + "..."


_FIELD_COLUMNS: dict[str, tuple[str, ...]] = {
    "task_commit": ("task_commit",), "image": ("image",), "limits": LIMIT_COLUMNS,
}


def _field_differences(da: pd.DataFrame, db: pd.DataFrame) -> dict[str, list[str]]:
    """Per checked field, the tasks (sorted) whose set of values differs between the runs.

    Both frames hold the common tasks only. The usual case, one value per task in each run, is
    compared as aligned arrays; several values for a task fall back to a set comparison.
    """
    columns = [c for cols in _FIELD_COLUMNS.values() for c in cols]
    ua = _distinct_per_task(da, ["task_id", *columns])
    ub = _distinct_per_task(db, ["task_id", *columns])
    single = ua["task_id"].is_unique and ub["task_id"].is_unique
    if single:
        ia, ib = ua.set_index("task_id"), ub.set_index("task_id").reindex(ua["task_id"])
    out: dict[str, list[str]] = {}
    for name, cols in _FIELD_COLUMNS.items():
        if single:
            differs = np.zeros(len(ia), dtype=bool)
            for c in cols:
                va, vb = ia[c].to_numpy(dtype=object), ib[c].to_numpy(dtype=object)
                differs |= (va != vb) & ~(pd.isna(va) & pd.isna(vb))
            tasks = sorted(str(t) for t in ia.index[differs])
        else:
            keep = ["task_id", *cols]
            both = ua[keep].drop_duplicates().merge(ub[keep].drop_duplicates(), how="outer",
                                                    indicator=True)
            tasks = sorted(set(both.loc[both["_merge"] != "both", "task_id"]))
        out[name] = [_describe(t, ua, ub, cols) for t in tasks[:_EXAMPLES]] + tasks[_EXAMPLES:]
    return out


def _distinct_per_task(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """`frame[columns].drop_duplicates()`, without its cost in the usual case where every
    attempt of a task carries the same values: then one row per task (its first) is the answer.
    """
    tid = frame["task_id"]
    if tid.is_unique:
        return frame[columns]
    codes, uniques = pd.factorize(tid)
    # each task's first row (np.unique's return_index is the first occurrence, guaranteed;
    # a repeated fancy-index assignment's "last write wins" is not)
    first = np.unique(codes, return_index=True)[1]
    ref = first[codes]
    for c in columns[1:]:
        v = frame[c].to_numpy()
        if v.dtype.kind not in "fiub":
            v = v.astype(object)
        w = v[ref]
        differs = v != w  # NaN != NaN: those are checked apart, on the few rows concerned
        if differs.any() and not (pd.isna(v[differs]) & pd.isna(w[differs])).all():
            return frame[columns].drop_duplicates()
    return frame[columns].iloc[np.sort(first)]


def _describe(task: str, ua: pd.DataFrame, ub: pd.DataFrame, cols: Sequence[str]) -> str:
    def values(frame: pd.DataFrame) -> list[str]:
        rows = frame.loc[frame["task_id"] == task, list(cols)].drop_duplicates()
        return [" ".join(f"{c.removeprefix('limit_')}={v}" for c, v in zip(cols, row, strict=True))
                if len(cols) > 1 else str(row[0]) for row in rows.itertuples(index=False)]

    return f"{task} (A={_show(values(ua))}, B={_show(values(ub))})"


def _listing(items: list[str]) -> str:
    shown = ", ".join(items[:_EXAMPLES])
    return shown + (f", ... ({len(items) - _EXAMPLES} more)" if len(items) > _EXAMPLES else "")


def pair_runs(
    a: Run,
    b: Run,
    missing: Missing = "fail",
    allow_mismatch: Iterable[str] = (),
    infra_as_failure: bool = False,
) -> Pairing:
    """Check the invariants, join the attempts and apply the exclusion rule."""
    allowed = set(allow_mismatch)
    unknown = allowed - MISMATCH_FIELDS
    if unknown:
        raise ReportError(f"--allow-mismatch: unknown field(s) {sorted(unknown)}; "
                          f"choose from {sorted(MISMATCH_FIELDS)}")
    if missing not in ("skip", "fail"):
        raise ReportError(f"missing must be 'skip' or 'fail', got {missing!r}")
    da, db = a.attempts, b.attempts
    if da.empty or db.empty:
        raise ReportError("a run has no attempts: nothing to pair "
                          f"(A: {len(da)} attempts, B: {len(db)} attempts)")
    resource_diffs = resources.check(a, b, resources.FIELD in allowed)
    ta, tb = pd.Index(da["task_id"].unique()), pd.Index(db["task_id"].unique())
    common = ta.intersection(tb)
    problems: list[str] = []
    only_a, only_b = sorted(ta.difference(tb)), sorted(tb.difference(ta))
    if missing == "fail":
        if only_a:
            problems.append(f"tasks: {len(only_a)} task(s) only in A: {_listing(only_a)}")
        if only_b:
            problems.append(f"tasks: {len(only_b)} task(s) only in B: {_listing(only_b)}")
    da = da[da["task_id"].isin(common)] if only_a else da
    db = db[db["task_id"].isin(common)] if only_b else db
    allowed_diffs: dict[str, int] = {}
    if resource_diffs:
        allowed_diffs[resources.FIELD] = max(d["tasks"] for d in resource_diffs)
    hv_a, hv_b = a.harness_version, b.harness_version
    if hv_a != hv_b and "harness_version" in allowed:
        allowed_diffs["harness_version"] = len(common)
    elif hv_a != hv_b:
        problems.append(f"harness_version: A={hv_a!r}, B={hv_b!r}")
    # A task whose spec failed validation in either run never ran there: its record has no
    # commit and one attempt. It is dropped below (invalid); its fields and its attempts
    # without a partner are no reason to refuse the pairing.
    never_ran = pd.Index(da.loc[da["failure_reason"] == TASK_INVALID, "task_id"].unique()).union(
        db.loc[db["failure_reason"] == TASK_INVALID, "task_id"].unique())
    ran_a = da[~da["task_id"].isin(never_ran)] if len(never_ran) else da
    ran_b = db[~db["task_id"].isin(never_ran)] if len(never_ran) else db
    for column, diffs in _field_differences(ran_a, ran_b).items():
        if diffs and column in allowed:
            allowed_diffs[column] = len(diffs)
        elif diffs:
            problems.append(f"{column}: differs for {len(diffs)} task(s): {_listing(diffs)}")
    keys = ["task_id", "attempt_index"]
    cols = keys + ["suite", "passed", "task_invalid", "is_quarantined", "infra"]
    merged = da[cols].merge(db[cols], on=keys, how="outer", suffixes=("_a", "_b"),
                            indicator=True)
    unpaired = merged[merged["_merge"] != "both"]
    refused = unpaired[~unpaired["task_id"].isin(never_ran)] if len(never_ran) else unpaired
    if len(refused) and missing == "fail":
        from pytest_agentbench.schemas.records import attempt_key  # pydantic: only here

        items = [f"{attempt_key(t, i)} (only in {'A' if m == 'left_only' else 'B'})" for t, i, m in
                 zip(refused["task_id"], refused["attempt_index"], refused["_merge"],
                     strict=True)]
        problems.append(f"attempts: {len(items)} attempt(s) without a partner: {_listing(items)}")
    if problems:
        raise PairingError(problems)
    pairs = merged[merged["_merge"] == "both"]
    info = {
        "tasks_a": len(ta), "tasks_b": len(tb), "common_tasks": len(common),
        "missing_policy": missing, "only_in_a": [str(t) for t in only_a],
        "only_in_b": [str(t) for t in only_b],
        "unpaired_attempts": len(unpaired), "allowed_mismatches": allowed_diffs,
        "resource_differences": resource_diffs,
    }
    return _exclude(pairs, info, infra_as_failure)


def _exclude(pairs: pd.DataFrame, info: dict[str, Any], infra_as_failure: bool) -> Pairing:
    bad_rows = pairs["task_invalid_a"].astype(bool) | pairs["task_invalid_b"].astype(bool)
    bad_tasks = pairs.loc[bad_rows, "task_id"].unique()
    invalid = pairs["task_id"].isin(bad_tasks)
    quarantined = ~invalid & (pairs["is_quarantined_a"].astype(bool)
                              | pairs["is_quarantined_b"].astype(bool))
    infra_any = pairs["infra_a"].astype(bool) | pairs["infra_b"].astype(bool)
    infra = ~invalid & ~quarantined & infra_any
    keep = ~invalid & ~quarantined
    if not infra_as_failure:
        keep &= ~infra
    kept = pairs[keep]
    a_pass = kept["passed_a"].astype(bool) & ~kept["infra_a"].astype(bool)
    b_pass = kept["passed_b"].astype(bool) & ~kept["infra_b"].astype(bool)
    out = pd.DataFrame({
        "task_id": kept["task_id"].to_numpy(), "attempt_index": kept["attempt_index"].to_numpy(),
        "suite": kept["suite_a"].to_numpy(), "a_passed": a_pass.to_numpy(),
        "b_passed": b_pass.to_numpy(),
    })
    if not _sorted_by_task_attempt(out):
        out = out.sort_values(["task_id", "attempt_index"], ignore_index=True)
    exclusions = {
        "rule": ("tasks invalid or flaky in either run are dropped; then pairs with a "
                 "quarantined attempt; then pairs with an infra error "
                 + ("(counted as failures instead)" if infra_as_failure else "")).strip(),
        "invalid_or_flaky_tasks": int(len(bad_tasks)),
        "invalid_or_flaky_pairs": int(invalid.sum()),
        "quarantined_pairs": int(quarantined.sum()),
        "infra_pairs": int(infra.sum()),
        "infra_counted_as_failure": infra_as_failure,
    }
    return Pairing(pairs=out, info=info, exclusions=exclusions)


def _sorted_by_task_attempt(frame: pd.DataFrame) -> bool:
    """Already in (task_id, attempt_index) order? (The outer merge usually leaves it so, and
    checking is much cheaper than sorting strings again.)"""
    tid = frame["task_id"]
    if not tid.is_monotonic_increasing:
        return False
    t = tid.to_numpy(dtype=object)
    same = t[1:] == t[:-1]
    return bool((np.diff(frame["attempt_index"].to_numpy())[same] > 0).all())


def _outcome(pairs: pd.DataFrame) -> pd.Series:
    a, b = pairs["a_passed"], pairs["b_passed"]
    return pd.Series(np.select([a & b, a & ~b, ~a & b], ["both_pass", "a_only", "b_only"],
                               default="both_fail"), index=pairs.index)


def compare(
    a: Run,
    b: Run,
    method: Method = "mcnemar",
    missing: Missing = "fail",
    allow_mismatch: Iterable[str] = (),
    seed: int = 0,
    resamples: int = 10_000,
    alpha: float = 0.05,
    infra_as_failure: bool = False,
) -> PairedReport:
    """The paired report. Both McNemar and the bootstrap are computed; `method` names the
    primary test, whose result decides `significant`."""
    if method not in ("mcnemar", "bootstrap"):
        raise ReportError(f"method must be 'mcnemar' or 'bootstrap', got {method!r}")
    if resamples < 1:
        raise ReportError("resamples must be at least 1")
    pairing = pair_runs(a, b, missing, allow_mismatch, infra_as_failure)
    pairs = pairing.pairs.assign(outcome=lambda p: _outcome(p))
    counts = pairs["outcome"].value_counts()
    table = {k: int(counts.get(k, 0)) for k in ("both_pass", "a_only", "b_only", "both_fail")}
    n = len(pairs)
    mc = stats.mcnemar_test(table["a_only"], table["b_only"])
    diff = (pairs["b_passed"].astype(int) - pairs["a_passed"].astype(int))
    per_task = diff.groupby(pairs["task_id"]).agg(["sum", "size"])
    dist = stats.bootstrap_distribution(per_task["sum"], per_task["size"], resamples, seed)
    ci_low, ci_high = stats.percentile_interval(dist, 1 - alpha)
    task_ids, codes = _task_codes(pairs)
    exact = _exact(pairs, codes, table, n, len(task_ids), alpha)
    interval = "percentile"
    if n and not exact["bootstrap_alone"]:  # small sample: never tighter than the exact bounds
        ci_low, ci_high = min(ci_low, exact["ci_low"]), max(ci_high, exact["ci_high"])
        interval = (f"percentile, widened to the exact interval: fewer than "
                    f"{stats.BOOTSTRAP_MIN_PER_SIDE} tasks disagree each way")
    rate_a = float(pairs["a_passed"].mean()) if n else math.nan
    rate_b = float(pairs["b_passed"].mean()) if n else math.nan
    significant = (mc.pvalue < alpha if method == "mcnemar"
                   else bool(n) and not (ci_low <= 0.0 <= ci_high))
    data: dict[str, Any] = {
        "schema": "agentbench.paired",
        "schema_version": SCHEMA_VERSION,
        "run_a": _run_info(a), "run_b": _run_info(b),
        "method": method, "alpha": alpha,
        "pairing": {"join": "task_id, attempt_index", **pairing.info},
        "exclusions": pairing.exclusions,
        "pairs": n, "tasks": int(per_task.shape[0]),
        "table": table,
        "pass_rate_a": _num(rate_a), "pass_rate_b": _num(rate_b),
        "difference": _num(rate_b - rate_a),
        "mcnemar": {"test": mc.test, "exact": mc.exact, "discordant": mc.b + mc.c,
                    "statistic": mc.statistic, "pvalue": mc.pvalue},
        "bootstrap": {"estimate": _num(rate_b - rate_a), "ci_low": _num(ci_low),
                      "ci_high": _num(ci_high), "confidence": 1 - alpha,
                      "resamples": resamples, "seed": seed, "unit": "task",
                      "interval": interval},
        "exact": exact,
        "significant": bool(significant),
    }
    data["power"] = paired_tasks.power_section(pairs, codes, alpha, mc.b + mc.c)
    data["task_level"] = paired_tasks.task_level(
        pairs, codes, task_ids, a.attempts, b.attempts, infra_as_failure, alpha, resamples, seed)
    return PairedReport(data=data, pairs=pairs, distribution=dist)


def _exact(pairs: pd.DataFrame, codes: np.ndarray, table: dict[str, int], n: int, tasks: int,
           alpha: float) -> dict[str, Any]:
    """stats.exact_section for these pairs: how many tasks have a pair going each way."""
    a = pairs["a_passed"].to_numpy(dtype=bool)
    b = pairs["b_passed"].to_numpy(dtype=bool)
    a_tasks = int(np.count_nonzero(np.bincount(codes[a & ~b], minlength=tasks)))
    b_tasks = int(np.count_nonzero(np.bincount(codes[~a & b], minlength=tasks)))
    return stats.exact_section(table["a_only"], table["b_only"], n, tasks, a_tasks, b_tasks,
                               alpha)


def _task_codes(pairs: pd.DataFrame) -> tuple[pd.Index, np.ndarray]:
    """The pairs' distinct task ids (sorted: the pairs are sorted by task) and each pair's
    position among them."""
    codes, uniques = pd.factorize(pairs["task_id"], sort=False)
    return pd.Index(uniques), np.asarray(codes, dtype=np.intp)


def _run_info(run: Run) -> dict[str, Any]:
    return {"run_id": run.run_id, "variant": run.variant, "path": str(run.path),
            "harness_version": run.harness_version}


def _num(x: float) -> float | None:
    return None if x is None or math.isnan(x) else float(x)
