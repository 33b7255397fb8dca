"""N-way comparison of runs (`agentbench report compare RUN RUN [RUN...]`).

One row per (run, scope), scopes being the run overall, each suite and each task, with the
summary's figures: pass rate over scored attempts with its Wilson 95% interval (summary.py's
rules: scored = valid, non-flaky, non-quarantined, no infra error unless `infra_as_failure`),
and per scored attempt the cost (total and mean), tokens, steps and wall time (means). Every
run but the baseline is also tested against the baseline with the paired report (paired.py:
same invariants, same exclusion rule, McNemar and the task bootstrap); a run the invariants
refuse gets a one-line reason instead of numbers. Runs made under another resource policy than
the baseline's are refused as a whole (one line, reporting/resources.py) unless
`--allow-resource-difference`; then `resource_sensitivity` gives the pass rate per resource scale
when the runs have several (`--agentbench-resources-scale`).

All runs go into one frame and one groupby: no Python loop over attempts, so 100k attempts per
run cost what loading them costs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

import pytest_agentbench.reporting.resources as resources
import pytest_agentbench.reporting.stats as stats
from pytest_agentbench.reporting.load import ReportError, Run
from pytest_agentbench.reporting.paired import Method, Missing, PairingError, compare
from pytest_agentbench.reporting.summary import scored_mask

SCHEMA_VERSION = 1
COMPARE_COLUMNS = [
    "run", "run_id", "variant", "baseline", "scope_type", "scope", "suite", "attempts", "scored",
    "passed", "pass_rate", "ci_low", "ci_high", "diff_vs_baseline", "cost_usd",
    "cost_per_attempt_usd", "tokens_per_attempt", "steps_per_attempt", "wall_sec_per_attempt",
    "paired", "pairs", "a_only", "b_only", "mcnemar_pvalue", "bootstrap_ci_low",
    "bootstrap_ci_high", "pairing_note", "cost_per_pass_usd", "frontier",
]


@dataclass
class CompareReport:
    """`data` is the JSON document (runs overall, paired results); `table` the CSV rows."""

    data: dict[str, Any]
    table: pd.DataFrame
    runs: Sequence[Run] = ()  # the runs compared (the HTML page's task signal reads them)


def labels(runs: Sequence[Run]) -> list[str]:
    """A short name per run: its variant, or `variant (run id)` when variants repeat."""
    variants = [r.variant or r.run_id for r in runs]
    out = []
    for run, name in zip(runs, variants, strict=True):
        out.append(name if variants.count(name) == 1 else f"{name} ({run.run_id})")
    if len(set(out)) < len(out):  # same variant and run id twice: number them
        out = [f"{name} #{i + 1}" for i, name in enumerate(out)]
    return out


def compare_runs(
    runs: Sequence[Run],
    baseline: int = 0,
    method: Method = "mcnemar",
    missing: Missing = "fail",
    allow_mismatch: Iterable[str] = (),
    seed: int = 0,
    resamples: int = 10_000,
    alpha: float = 0.05,
    infra_as_failure: bool = False,
) -> CompareReport:
    """The side-by-side table of `runs` and the paired test of each against `runs[baseline]`."""
    if len(runs) < 2:
        raise ReportError(f"compare needs at least two runs, got {len(runs)}")
    if not 0 <= baseline < len(runs):
        raise ReportError(f"baseline index {baseline} is not one of the {len(runs)} runs")
    for run in runs:  # nothing to put in its row, nothing to pair with it
        if run.attempts.empty:
            raise ReportError(f"run {run.path} has no attempts: nothing to compare")
    names = labels(runs)
    allowed = list(allow_mismatch)
    # runs made under another resource policy than the baseline's: refused (one line) before
    # anything else, unless asked for (the sensitivity table below is what that is for)
    resource_diffs = {i: resources.check(runs[baseline], run, resources.FIELD in allowed)
                      for i, run in enumerate(runs) if i != baseline}
    table = _scope_table(runs, names, baseline, infra_as_failure)
    paired: list[dict[str, Any] | None] = []
    for i, run in enumerate(runs):
        if i == baseline:
            paired.append(None)
            continue
        paired.append(_paired(runs[baseline], run, method, missing, allowed, seed, resamples,
                              alpha, infra_as_failure))
    table = _add_paired(table, names, paired)
    table = _add_frontier(table)
    overall = table[table["scope_type"] == "overall"].set_index("run")
    rows = []
    for i, (run, name) in enumerate(zip(runs, names, strict=True)):
        o = overall.loc[name]
        rows.append({
            "run": name, "run_id": run.run_id, "variant": run.variant, "path": str(run.path),
            "baseline": i == baseline, "attempts": int(o["attempts"]),
            "scored": int(o["scored"]), "passed": int(o["passed"]),
            "pass_rate": _num(o["pass_rate"]), "ci_low": _num(o["ci_low"]),
            "ci_high": _num(o["ci_high"]), "diff_vs_baseline": _num(o["diff_vs_baseline"]),
            "cost_usd": _num(o["cost_usd"]),
            "cost_per_attempt_usd": _num(o["cost_per_attempt_usd"]),
            "tokens_per_attempt": _num(o["tokens_per_attempt"]),
            "steps_per_attempt": _num(o["steps_per_attempt"]),
            "wall_sec_per_attempt": _num(o["wall_sec_per_attempt"]),
            "cost_per_pass_usd": _num(o["cost_per_pass_usd"]),
            "frontier": bool(o["frontier"]),
            "paired": paired[i], "warnings": list(run.warnings),
            "resources_scale": resources.scale_of(run),
            "resource_differences": resource_diffs.get(i, []),
        })
    data = {
        "schema": "agentbench.compare", "schema_version": SCHEMA_VERSION,
        "baseline": names[baseline], "method": method, "alpha": alpha,
        "rules": {
            "scored": "valid, non-flaky, non-quarantined attempts",
            "infra_errors": "counted_as_failure" if infra_as_failure else "excluded",
            "interval": "wilson", "confidence": 0.95, "unit": "attempt",
            "per_attempt": "means over scored attempts; cost_usd is their total",
            "paired": "each run against the baseline, as `report paired` (A = baseline)",
            "frontier": FRONTIER_RULE,
        },
        "runs": rows,
        "resource_sensitivity": resources.sensitivity(
            runs, [scored_mask(r.attempts, infra_as_failure).to_numpy() for r in runs]),
    }
    return CompareReport(data=data, table=table[COMPARE_COLUMNS], runs=tuple(runs))


def _paired(base: Run, run: Run, method: Method, missing: Missing, allowed: list[str],
            seed: int, resamples: int, alpha: float, infra_as_failure: bool,
            ) -> dict[str, Any]:
    """The paired result of `run` against `base`, or {"note": one line} when refused."""
    try:
        report = compare(base, run, method, missing, allowed, seed, resamples, alpha,
                         infra_as_failure)
    except PairingError as exc:
        return {"note": "not paired: " + "; ".join(exc.problems)}
    except ReportError as exc:
        return {"note": "not paired: " + " ".join(str(exc).split())}
    d = report.data
    return {"note": "", "pairs": d["pairs"], "tasks": d["tasks"], "table": d["table"],
            "difference": d["difference"], "mcnemar": d["mcnemar"],
            "bootstrap": d["bootstrap"], "significant": d["significant"],
            "exclusions": d["exclusions"], "allowed_mismatches":
                d["pairing"]["allowed_mismatches"]}


def _scope_table(runs: Sequence[Run], names: list[str], baseline: int,
                 infra_as_failure: bool) -> pd.DataFrame:
    """Per (run, scope) figures from one concatenated frame and one groupby per scope type."""
    cols = ["task_id", "suite", "passed", "category", "cost_usd", "total_tokens", "steps",
            "duration_sec"]
    parts = []
    for name, run in zip(names, runs, strict=True):
        df = run.attempts[cols]
        scored = scored_mask(df, infra_as_failure).to_numpy()
        parts.append(pd.DataFrame({
            "run": name, "task_id": df["task_id"].to_numpy(), "suite": df["suite"].to_numpy(),
            "_suite": df["suite"].to_numpy(), "overall": "(all)", "_scored": scored,
            "_pass": scored & df["passed"].to_numpy(),
            "_cost": np.where(scored, df["cost_usd"].to_numpy(dtype=float), np.nan),
            "_tokens": np.where(scored, df["total_tokens"].to_numpy(dtype=float), np.nan),
            "_steps": np.where(scored, df["steps"].to_numpy(dtype=float), np.nan),
            "_wall": np.where(scored, df["duration_sec"].to_numpy(dtype=float), np.nan),
        }))
    work = pd.concat(parts, ignore_index=True)
    work["run"] = pd.Categorical(work["run"], categories=names)
    out = []
    for scope_type, key in (("overall", "overall"), ("suite", "_suite"), ("task", "task_id")):
        if work.empty:
            break
        g = work.groupby(["run", key], sort=True, observed=True)
        t = g.agg(suite=("suite", "first"), attempts=("_scored", "size"),
                  scored=("_scored", "sum"), passed=("_pass", "sum"),
                  cost_usd=("_cost", "sum"), _cost_known=("_cost", "count"),
                  cost_per_attempt_usd=("_cost", "mean"),
                  tokens_per_attempt=("_tokens", "mean"), steps_per_attempt=("_steps", "mean"),
                  wall_sec_per_attempt=("_wall", "mean"))
        t["cost_usd"] = t["cost_usd"].where(t["_cost_known"] > 0)  # no known cost: empty, not 0
        t = t.reset_index().rename(columns={key: "scope"})
        if scope_type != "task":
            t["suite"] = "" if scope_type == "overall" else t["scope"]
        t["scope_type"] = scope_type
        out.append(t)
    if not out:
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    table = pd.concat(out, ignore_index=True)
    table["run"] = table["run"].astype(str)
    with np.errstate(divide="ignore", invalid="ignore"):
        table["pass_rate"] = np.where(table["scored"] > 0, table["passed"] / table["scored"],
                                      np.nan)
    table["ci_low"], table["ci_high"] = stats.wilson_arrays(table["passed"], table["scored"])
    base = table.loc[table["run"] == names[baseline], ["scope_type", "scope", "pass_rate"]]
    table = table.merge(base.rename(columns={"pass_rate": "_base_rate"}),
                        on=["scope_type", "scope"], how="left")
    table["diff_vs_baseline"] = table["pass_rate"] - table["_base_rate"]
    by_name = {n: r for n, r in zip(names, runs, strict=True)}
    table["run_id"] = table["run"].map({n: r.run_id for n, r in by_name.items()})
    table["variant"] = table["run"].map({n: r.variant for n, r in by_name.items()})
    table["baseline"] = table["run"] == names[baseline]
    order = {"overall": 0, "suite": 1, "task": 2}
    rank = {n: i for i, n in enumerate(names)}
    table = table.assign(_o=table["scope_type"].map(order), _r=table["run"].map(rank))
    return table.sort_values(["_o", "scope", "_r"], ignore_index=True)


def _add_paired(table: pd.DataFrame, names: list[str],
                paired: list[dict[str, Any] | None]) -> pd.DataFrame:
    """The overall rows carry each run's paired result against the baseline."""
    table = table.assign(paired=False, pairs=np.nan, a_only=np.nan, b_only=np.nan,
                         mcnemar_pvalue=np.nan, bootstrap_ci_low=np.nan,
                         bootstrap_ci_high=np.nan, pairing_note="")
    overall = table["scope_type"] == "overall"
    for name, p in zip(names, paired, strict=True):
        if p is None:
            continue
        row = overall & (table["run"] == name)
        if p["note"]:
            table.loc[row, "pairing_note"] = p["note"]
            continue
        table.loc[row, ["paired", "pairs", "a_only", "b_only", "mcnemar_pvalue",
                        "bootstrap_ci_low", "bootstrap_ci_high"]] = [
            True, p["pairs"], p["table"]["a_only"], p["table"]["b_only"],
            p["mcnemar"]["pvalue"], _nan(p["bootstrap"]["ci_low"]),
            _nan(p["bootstrap"]["ci_high"])]
    for column in ("pairs", "a_only", "b_only"):
        table[column] = table[column].astype("Int64")
    return table


FRONTIER_RULE = ("runs no other run beats on both pass rate (higher) and cost per scored "
                 "attempt (lower), ties kept; a run without a known cost is not on it")


def pareto_frontier(cost: Sequence[float], rate: Sequence[float]) -> list[bool]:
    """Per point, whether no other point has cost <= and rate >= with one of them strict
    (lower cost and higher pass rate are better). A point with a missing (NaN) cost or rate is
    never on the frontier and dominates none."""
    c = np.asarray(cost, dtype=float)
    r = np.asarray(rate, dtype=float)
    ok = ~(np.isnan(c) | np.isnan(r))
    out = []
    for i in range(len(c)):
        if not ok[i]:
            out.append(False)
            continue
        better = ok & (c <= c[i]) & (r >= r[i]) & ((c < c[i]) | (r > r[i]))
        out.append(not bool(better.any()))
    return out


def _add_frontier(table: pd.DataFrame) -> pd.DataFrame:
    """`cost_per_pass_usd` on every row (cost of the scored attempts / passes) and `frontier`
    on the overall rows: the runs on the cost vs pass-rate Pareto frontier."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per_pass = np.where(table["passed"] > 0,
                            table["cost_usd"].to_numpy(dtype=float) / table["passed"], np.nan)
    table = table.assign(cost_per_pass_usd=per_pass, frontier=False)
    overall = (table["scope_type"] == "overall").to_numpy()
    rows = table[overall]
    table.loc[overall, "frontier"] = pareto_frontier(
        rows["cost_per_attempt_usd"].to_numpy(dtype=float), rows["pass_rate"].to_numpy(dtype=float))
    table["frontier"] = table["frontier"].astype(bool)
    return table


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def _num(x: Any) -> float | None:
    if isinstance(x, np.generic):
        x = x.item()
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)
