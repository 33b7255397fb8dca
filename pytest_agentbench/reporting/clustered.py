"""Statistics for several attempts per task: pass^k, a pass rate clustered by task, and the cost
per solved task with an interval over tasks.

Attempts of one task are not independent (the same task is easy or hard every time), so with
several attempts per task the per-attempt Wilson interval is too narrow. Everything here takes
per-task aggregates (attempts `n`, passes `c`, cost) as numpy arrays, one entry per task.

numpy only, on purpose: the summary is on the cold path of `agentbench report summary` and
statsmodels imports scipy (seconds). The closed forms are checked against statsmodels in the
tests (OLS of `passed` on a constant with `cov_type="cluster"`, groups = task, to 1e-9).

- `pass_hat_k`: tau-bench's pass^k, the probability that k attempts drawn without replacement
  from a task's n attempts all pass, unbiased estimator C(c, k) / C(n, k) (exact fractions).
- `clustered_rate`: the mean of the 0/1 outcomes with its cluster-robust standard error (CR1,
  statsmodels' default small-sample correction G / (G - 1) · (N - 1) / (N - 1)) and a 95%
  interval from Student's t with G - 1 degrees of freedom, clipped to [0, 1] (with few tasks
  the normal interval is too narrow: 5 tasks of 5 attempts covered 87% of the time in a
  simulation, t 94%; statsmodels' `use_t=True` with cluster groups does the same; the quantile
  comes from scipy.special, imported only here, 0.17 s, never for one attempt per task);
  when that standard error is 0 (every task at the same rate,
  e.g. all pass) the interval is Wilson's over tasks instead (design effect at its maximum).
- `cost_per_pass`: total cost / passes with a percentile cluster bootstrap over tasks (seeded,
  vectorised) up to `BOOTSTRAP_MAX_TASKS` tasks; above that, where the bootstrap's cost grows
  with tasks x resamples, the delta-method interval with the cluster-robust variance of the
  ratio (the bootstrap's large-sample limit), O(tasks).
"""

from __future__ import annotations

import math
from fractions import Fraction
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

import pytest_agentbench.reporting.stats as stats

Z95 = NormalDist().inv_cdf(0.975)
RESAMPLES = 2000
BOOTSTRAP_MAX_TASKS = 5000
_CHUNK = 250  # resamples per block: bounds the (resamples x tasks) index array

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k for one task with n attempts of which c passed: C(c, k) / C(n, k)."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    return float(Fraction(math.comb(c, k), math.comb(n, k)))


def pass_k_rows(n: npt.ArrayLike, c: npt.ArrayLike) -> list[dict[str, Any]]:
    """pass@k (`value`) and pass^k (`pass_hat_k`) for k = 1..max n, each averaged over the tasks
    with at least k attempts (`tasks`); [] when no task has two attempts. Computed once per
    distinct (n, c), so the cost does not grow with the number of tasks."""
    nn = np.asarray(n, dtype=np.int64)
    cc = np.asarray(c, dtype=np.int64)
    if len(nn) == 0 or int(nn.max()) < 2:
        return []
    base = int(nn.max()) + 1
    keys, counts = np.unique(nn * base + cc, return_counts=True)
    combos = [(int(key // base), int(key % base), int(count))
              for key, count in zip(keys, counts, strict=True)]
    out = []
    for k in range(1, base):
        at = hat = 0.0
        tasks = 0
        for tn, tc, count in combos:
            if tn >= k:
                at += stats.pass_at_k(tn, tc, k) * count
                hat += pass_hat_k(tn, tc, k) * count
                tasks += count
        out.append({"k": k, "value": at / tasks if tasks else None,
                    "pass_hat_k": hat / tasks if tasks else None, "tasks": tasks})
    return out


def cr1_se(n: npt.ArrayLike, c: npt.ArrayLike) -> float:
    """Cluster-robust (CR1) standard error of the overall pass rate sum(c) / sum(n), clusters =
    tasks: sqrt(G / (G - 1) * sum_g (c_g - n_g p)^2) / N. That is statsmodels' OLS of the 0/1
    outcome on a constant with cov_type="cluster" (its correction (N - 1) / (N - K) is 1 for
    K = 1). nan with fewer than two tasks."""
    nn = np.asarray(n, dtype=np.float64)
    cc = np.asarray(c, dtype=np.float64)
    groups = len(nn)
    total = float(nn.sum())
    if groups < 2 or total <= 0:
        return math.nan
    p = float(cc.sum()) / total
    resid = cc - nn * p
    return math.sqrt(groups / (groups - 1) * float(resid @ resid)) / total


def clustered_rate(n: npt.ArrayLike, c: npt.ArrayLike) -> dict[str, Any] | None:
    """The overall pass rate's interval clustered by task, or None when no task has two
    attempts (the per-attempt Wilson interval is then right) or there are fewer than two tasks.

    `method` "cr1": rate ± t(0.975, G - 1) CR1 SE, clipped to [0, 1]; "wilson_tasks" when
    that SE is 0:
    Wilson's interval with the tasks as the sample (sum of per-task rates over G tasks).
    `design_effect`: the CR1 variance over the variance of independent attempts, p(1-p)/N
    (the mean attempts per task under "wilson_tasks"); `effective_n` = N / design_effect.
    """
    nn = np.asarray(n, dtype=np.int64)
    cc = np.asarray(c, dtype=np.int64)
    nn, cc = nn[nn > 0], cc[nn > 0]
    if len(nn) < 2 or int(nn.max()) < 2:
        return None
    total, passed, groups = int(nn.sum()), int(cc.sum()), len(nn)
    p = passed / total
    se = cr1_se(nn, cc)
    if se > 0:
        from scipy.special import stdtrit  # Student's t quantile; see the module docstring

        deff = se**2 / (p * (1 - p) / total)
        crit = float(stdtrit(groups - 1, 0.975))
        low, high = max(0.0, p - crit * se), min(1.0, p + crit * se)
        method = "cr1"
    else:
        deff = total / groups
        low_a, high_a = stats.wilson_arrays(p * groups, groups)
        low, high = float(low_a), float(high_a)
        method = "wilson_tasks"
    return {"method": method, "rate": p, "se": se, "ci_low": low, "ci_high": high,
            "confidence": 0.95, "tasks": groups, "attempts": total,
            "max_attempts_per_task": int(nn.max()), "design_effect": deff,
            "effective_n": total / deff}


def cost_per_pass(cost: npt.ArrayLike, passes: npt.ArrayLike, seed: int = 0,
                  resamples: int = RESAMPLES,
                  bootstrap_max_tasks: int = BOOTSTRAP_MAX_TASKS) -> dict[str, Any]:
    """Cost per solved task, sum(cost) / sum(passes), with a 95% interval over tasks.

    `cost` and `passes` are per task (cost of its scored attempts, unknown costs as 0). Values
    are None when nothing passed or no cost is known; `ci_high` is None when more than 2.5% of
    bootstrap resamples hold no pass (the cost per pass is then unbounded).
    """
    x = np.asarray(cost, dtype=np.float64)
    y = np.asarray(passes, dtype=np.float64)
    tasks = len(x)
    out: dict[str, Any] = {"value": None, "ci_low": None, "ci_high": None, "method": None,
                           "tasks": tasks, "resamples": None, "seed": None}
    total_pass = float(y.sum())
    if tasks == 0 or total_pass <= 0:
        return out
    value = float(x.sum()) / total_pass
    out["value"] = value
    if tasks < 2:
        return out
    if tasks <= bootstrap_max_tasks:
        low, high = _bootstrap_ratio(x, y, resamples, seed)
        out.update(method="cluster_bootstrap_percentile", resamples=resamples, seed=seed)
    else:
        z = x - value * y  # linearised ratio, one residual per task
        se = math.sqrt(tasks / (tasks - 1) * float(z @ z)) / total_pass
        low, high = max(0.0, value - Z95 * se), value + Z95 * se
        out["method"] = "delta_cluster_robust"
    out["ci_low"] = None if math.isnan(low) else low
    out["ci_high"] = None if not math.isfinite(high) else high
    return out


def _bootstrap_ratio(x: FloatArray, y: FloatArray, resamples: int,
                     seed: int) -> tuple[float, float]:
    """Percentile interval of sum(x*) / sum(y*) over resamples of the tasks with replacement;
    a resample with no pass has an infinite ratio."""
    rng = np.random.default_rng(seed)
    tasks = len(x)
    ratios = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, _CHUNK):
        size = min(_CHUNK, resamples - start)
        idx = rng.integers(0, tasks, (size, tasks), dtype=np.int32 if tasks < 2**31 else np.int64)
        num, den = x[idx].sum(axis=1), y[idx].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios[start:start + size] = np.where(den > 0, num / np.where(den > 0, den, 1),
                                                  np.inf)
    ratios.sort()
    low = float(np.quantile(ratios, 0.025, method="inverted_cdf"))
    high = float(np.quantile(ratios, 0.975, method="inverted_cdf"))
    return low, high
