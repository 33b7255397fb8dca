"""The task-level half of the paired report, and its power section.

Attempt-level pairing (paired.py) joins attempt i of a task in A with attempt i in B and treats
the pairs as independent. Here the unit is the task, and every scored attempt counts:

- per task, the pass rate in A and in B over all its scored attempts (an infra error counts as a
  failure under `infra_as_failure`, else it is left out, as in the pairs);
- d_t = rate_B(t) - rate_A(t) for the tasks scored in both runs; their mean, with a percentile
  cluster bootstrap (tasks resampled with replacement), a paired t-test on d_t (equal to
  scipy.stats.ttest_rel(rate_B, rate_A)) and the Wilcoxon signed-rank test (scipy, zeros dropped);
- the clustered McNemar test of Durkalski et al. (2003, "Analysis of clustered matched-pair
  data", Stat Med 22:2417-2428) on the attempt pairs grouped by task: with b_k, c_k the pairs of
  task k that passed only in A, only in B, and n_k its pairs,
      X2 = [sum_k (b_k - c_k) / n_k]^2 / sum_k [(b_k - c_k) / n_k]^2  ~ chi-square(1);
  with one pair per task it is McNemar's statistic without continuity correction.

Small samples (stats.py's rule): the three tests above are large-sample (chi-square,
t, Wilcoxon's normal approximation with ties) and are not shown when fewer than
`stats.ASYMPTOTIC_MIN_TASKS` tasks have a non-zero difference (their p-value and statistic are
null, `not_shown` says why; the exact McNemar of the pairs stands); the cluster bootstrap's
interval is widened to the exact one (stats.exact_difference_bounds on the per-task differences,
each task one unit) unless at least `stats.BOOTSTRAP_MIN_PER_SIDE` tasks differ each way.

The power section is the minimum detectable effect of the pairs (power.py) at the report's alpha
and power 0.8, with the pairs' discordance and the design effect of their clustering by task.
Everything is vectorised over integer task codes: 100,000 tasks cost a few tens of milliseconds.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

import pytest_agentbench.reporting.power as power
import pytest_agentbench.reporting.stats as stats

FloatArray = npt.NDArray[np.float64]


def _num(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def _fsum(codes: npt.NDArray[np.intp], values: npt.ArrayLike, size: int) -> FloatArray:
    """Per-code sums of `values`, as floats."""
    return np.asarray(np.bincount(codes, weights=np.asarray(values, dtype=np.float64),
                                  minlength=size), dtype=np.float64)


def task_rates(attempts: pd.DataFrame, tasks: pd.Index,
               infra_as_failure: bool) -> tuple[FloatArray, FloatArray]:
    """(scored attempts, passes) per task of `tasks`, from one run's attempt frame."""
    category = attempts["category"]
    scored = (category == "scored").to_numpy(dtype=bool)  # categorical: compares codes
    keep = scored | (category == "infra").to_numpy(dtype=bool) if infra_as_failure else scored
    codes = tasks.get_indexer(attempts["task_id"].to_numpy()[keep])
    ok = codes >= 0
    passed = attempts["passed"].to_numpy(dtype=bool)[keep] & scored[keep]
    n = np.bincount(codes[ok], minlength=len(tasks)).astype(np.float64)
    c = _fsum(codes[ok], passed[ok], len(tasks))
    return n, c


def cluster_bootstrap_mean(values: FloatArray, resamples: int, seed: int) -> FloatArray:
    """Bootstrap replicates of mean(values), resampling the values (tasks) with replacement.

    As in stats.bootstrap_distribution, a uniform resample of T tasks is a multinomial draw of T
    over the distinct values with their observed frequencies: O(resamples x distinct values).
    """
    if len(values) == 0:
        return np.full(resamples, np.nan)
    distinct, counts = np.unique(values, return_counts=True)
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(len(values), counts / counts.sum(), size=resamples)
    return np.asarray(draws @ distinct / len(values), dtype=np.float64)


def paired_t(diffs: FloatArray) -> dict[str, Any]:
    """One-sample t-test of the per-task differences against 0 (= scipy.stats.ttest_rel)."""
    from scipy.stats import t as t_dist

    n = len(diffs)
    sd = float(diffs.std(ddof=1)) if n > 1 else math.nan
    if n < 2 or sd == 0 or math.isnan(sd):
        return {"statistic": None, "df": max(n - 1, 0), "pvalue": None}
    stat = float(diffs.mean()) / (sd / math.sqrt(n))
    return {"statistic": stat, "df": n - 1, "pvalue": float(2 * t_dist.sf(abs(stat), n - 1))}


def wilcoxon(diffs: FloatArray) -> dict[str, Any]:
    """scipy.stats.wilcoxon on the per-task differences (zero differences dropped)."""
    nonzero = int(np.count_nonzero(diffs))
    out: dict[str, Any] = {"statistic": None, "pvalue": None, "nonzero": nonzero,
                           "zero_method": "wilcox"}
    if nonzero == 0:
        return out
    from scipy.stats import wilcoxon as scipy_wilcoxon

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = scipy_wilcoxon(diffs, zero_method="wilcox")
    out.update(statistic=_num(float(res.statistic)), pvalue=_num(float(res.pvalue)))
    return out


def durkalski(a_only: FloatArray, b_only: FloatArray, pairs: FloatArray) -> dict[str, Any]:
    """Clustered McNemar (Durkalski et al. 2003) from per-task discordant and pair counts."""
    from scipy.stats import chi2

    u = (a_only - b_only) / pairs
    den = float((u * u).sum())
    stat = float(u.sum()) ** 2 / den if den > 0 else 0.0
    return {"test": "Durkalski et al. (2003) clustered McNemar, chi-square(1)",
            "statistic": stat, "pvalue": float(chi2.sf(stat, 1)) if den > 0 else 1.0,
            "clusters": int(len(u))}


def task_level(pairs: pd.DataFrame, codes: npt.NDArray[np.intp], tasks: pd.Index,
               att_a: pd.DataFrame, att_b: pd.DataFrame, infra_as_failure: bool,
               alpha: float, resamples: int, seed: int) -> dict[str, Any]:
    """The "task_level" section of the paired data (see the module docstring and SCHEMA.md).

    `codes[i]` is the position in `tasks` of pair i's task.
    """
    n_a, c_a = task_rates(att_a, tasks, infra_as_failure)
    n_b, c_b = task_rates(att_b, tasks, infra_as_failure)
    both = (n_a > 0) & (n_b > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate_a, rate_b = c_a / n_a, c_b / n_b
    diffs = (rate_b - rate_a)[both]
    dist = cluster_bootstrap_mean(diffs, resamples, seed)
    low, high = (np.quantile(dist, [alpha / 2, 1 - alpha / 2]) if len(diffs)
                 else (math.nan, math.nan))
    a = pairs["a_passed"].to_numpy(dtype=bool)
    b = pairs["b_passed"].to_numpy(dtype=bool)
    k = len(tasks)
    per_pairs = np.bincount(codes, minlength=k).astype(np.float64)
    a_only, b_only = _fsum(codes, a & ~b, k), _fsum(codes, ~a & b, k)
    has = per_pairs > 0
    mean = float(diffs.mean()) if len(diffs) else math.nan
    t_test, signed_rank = paired_t(diffs), wilcoxon(diffs)
    clustered = durkalski(a_only[has], b_only[has], per_pairs[has])
    nonzero = int(np.count_nonzero(diffs))
    small = None
    if nonzero < stats.ASYMPTOTIC_MIN_TASKS:
        small = (f"not shown: large-sample test, needs at least {stats.ASYMPTOTIC_MIN_TASKS} "
                 f"tasks with a non-zero difference, here {nonzero}; the exact McNemar test "
                 "of the pairs stands")
        for part in (t_test, signed_rank, clustered):
            part.update(statistic=None, pvalue=None, not_shown=small)
    up, down = int((diffs > 0).sum()), int((diffs < 0).sum())
    interval = "percentile"
    if len(diffs) and min(up, down) < stats.BOOTSTRAP_MIN_PER_SIDE:
        e_low, e_high = stats.exact_difference_bounds(
            float(np.clip(diffs, 0, None).sum()), float(np.clip(-diffs, 0, None).sum()),
            len(diffs), alpha / 2)
        low, high = min(float(low), e_low), max(float(high), e_high)
        interval = (f"percentile, widened to the exact interval: fewer than "
                    f"{stats.BOOTSTRAP_MIN_PER_SIDE} tasks differ each way")
    return {
        "unit": "task", "tasks": int(both.sum()),
        "attempts_a": int(n_a.sum()), "attempts_b": int(n_b.sum()),
        "mean_rate_a": _num(float(rate_a[both].mean()) if both.any() else math.nan),
        "mean_rate_b": _num(float(rate_b[both].mean()) if both.any() else math.nan),
        "mean_difference": _num(mean),
        "bootstrap": {"ci_low": _num(float(low)), "ci_high": _num(float(high)),
                      "confidence": 1 - alpha, "resamples": resamples, "seed": seed,
                      "interval": interval, "resampled": "tasks"},
        "nonzero_tasks": nonzero, "small_sample": small,
        "t_test": t_test,
        "wilcoxon": signed_rank,
        "clustered_mcnemar": clustered,
        "per_task": {
            "task_id": tasks[both].to_numpy(dtype=object).astype(str).tolist(),
            "attempts_a": n_a[both].astype(np.int64).tolist(),
            "passed_a": c_a[both].astype(np.int64).tolist(),
            "attempts_b": n_b[both].astype(np.int64).tolist(),
            "passed_b": c_b[both].astype(np.int64).tolist(),
            "rate_a": rate_a[both].tolist(), "rate_b": rate_b[both].tolist(),
        },
        "summary_line": _task_line(int(both.sum()), mean, low, high, alpha, t_test,
                                   signed_rank, clustered, small,
                                   interval == "percentile"),
    }


def _pts(x: float) -> str:
    return "—" if math.isnan(x) else f"{x * 100:+.1f} pts"


def _p(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _task_line(tasks: int, mean: float, low: float, high: float, alpha: float,
               t_test: dict[str, Any], wilcoxon_: dict[str, Any],
               clustered: dict[str, Any], small: str | None, boot_alone: bool) -> str:
    if tasks == 0:
        return "Task level: no task was scored in both runs."
    head = (f"Task level (every scored attempt, {tasks} tasks): mean per-task difference B − A "
            f"{_pts(mean)}, {(1 - alpha) * 100:.0f}% "
            f"{'cluster-bootstrap' if boot_alone else 'exact (few tasks differ)'} CI [{_pts(low)}, "
            f"{_pts(high)}]")
    if small is not None:
        return (f"{head}; paired t, Wilcoxon signed-rank and clustered McNemar (Durkalski 2003) "
                f"{small}.")
    return (f"{head}; paired t p = {_p(t_test['pvalue'])}, Wilcoxon signed-rank p = "
            f"{_p(wilcoxon_['pvalue'])}, clustered McNemar (Durkalski 2003) p = "
            f"{_p(clustered['pvalue'])}.")


def power_section(pairs: pd.DataFrame, codes: npt.NDArray[np.intp], alpha: float,
                  discordant: int) -> dict[str, Any]:
    """Minimum detectable effect of these pairs at `alpha` and power 0.8 (power.py)."""
    n = len(pairs)
    tasks = int(codes.max()) + 1 if n else 0
    psi = discordant / n if n else math.nan
    icc, icc_note = None, "unknown, taken as 1"
    if n and tasks < n:
        icc_note = "undefined: no pair difference varies (0/0), taken as 1"
        d = (pairs["b_passed"].to_numpy(dtype=np.int8)
             - pairs["a_passed"].to_numpy(dtype=np.int8)).astype(np.float64)
        icc = power.anova_icc(d, codes)
    per_task = n / tasks if tasks else 1.0
    deff = power.design_effect(per_task, icc) if per_task > 1 else 1.0
    effective = n / deff if n else 0.0
    mde = power.minimum_detectable_effect(effective, psi, alpha, power.MDE_POWER) if n else None
    out = {
        "alpha": alpha, "power": power.MDE_POWER, "sides": 2, "pairs": n,
        "discordance": _num(psi), "attempts_per_task": per_task, "icc": icc,
        "icc_note": icc_note if icc is None else None,
        "design_effect": deff, "effective_pairs": effective, "mde": mde,
        "formula": power.FORMULA, "discordance_under_effect": "max(observed discordance, MDE)",
    }
    out["summary_line"] = mde_line(out)
    return out


def mde_line(p: dict[str, Any]) -> str:
    """One sentence: the smallest difference these pairs can detect."""
    if p["mde"] is None:
        return (f"Minimum detectable effect: none — {p['pairs']} pair(s) are too few to detect "
                f"even a 100-point difference at alpha = {p['alpha']} with "
                f"{p['power'] * 100:.0f}% power.")
    cluster = ""
    if p["design_effect"] > 1:
        icc = (p.get("icc_note") or "unknown, taken as 1" if p["icc"] is None
               else format(p["icc"], ".2f"))
        cluster = (f", design effect {p['design_effect']:.2f} for "
                   f"{p['attempts_per_task']:.2g} attempts per task (ICC {icc})")
    return (f"Minimum detectable effect: {p['mde'] * 100:.1f} points (two-sided McNemar, alpha = "
            f"{p['alpha']}, power {p['power'] * 100:.0f}%, Connor 1987) from {p['pairs']} pairs, "
            f"discordance {p['discordance'] * 100:.1f}%{cluster}; smaller differences can go "
            "unnoticed.")
