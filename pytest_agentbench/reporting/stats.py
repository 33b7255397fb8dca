"""The statistics behind the reports, kept small and checked against independent references.

- `wilson_interval`, `wilson_arrays`: equal statsmodels' `proportion_confint(method="wilson")`
  (same formula, same clipping to [0, 1]; tested to 1e-12) but written out here: statsmodels
  imports scipy.stats, measured at +1.8 to 2.8 s on top of pandas (2 cores), which would double
  a cold `agentbench report summary` (about 2.1 s today, target 2 s). The summary needs nothing
  else from statsmodels.
- `mcnemar_test`: statsmodels' `mcnemar` (exact binomial when discordant pairs are few, else
  chi-square with continuity correction), imported on first use: only the paired report and the
  gate pay for scipy.
- `pass_at_k`: the unbiased estimator 1 - C(n-c, k) / C(n, k) (Chen et al., 2021), exact.
- `paired_bootstrap`: percentile bootstrap over tasks for the difference in pass rate B - A.
- `exact_difference_bounds`, `exact_section`: bounds of a paired difference that hold at any
  sample size (Clopper-Pearson on each discordant proportion, Bonferroni), the floor under the
  bootstrap's bounds when few tasks disagree (the small-sample rule below).

Small-sample rule: no bound or p-value is reported tighter than an exact method gives.
The percentile bootstrap over tasks is used alone only when at least `BOOTSTRAP_MIN_PER_SIDE`
tasks have a pair going each way; below that (e.g. no pair favours the baseline, where every
resample shows no drop and the bound degenerates to 0) its bounds are widened to the exact ones.
Large-sample statistics on the tasks (chi-square, t, normal approximations) are not shown below
`ASYMPTOTIC_MIN_TASKS` tasks with a non-zero difference; the exact McNemar test stands instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

EXACT_MCNEMAR_BELOW = 25  # discordant pairs b + c below this: exact binomial test
BOOTSTRAP_MIN_PER_SIDE = 10  # tasks with a pair going each way for the bootstrap alone
ASYMPTOTIC_MIN_TASKS = 25  # tasks with a non-zero difference for large-sample task statistics


def wilson_interval(successes: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Two-sided (1 - alpha) Wilson score interval; (nan, nan) when n == 0."""
    if n <= 0:
        return (math.nan, math.nan)
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, {n}], got {successes}")
    crit = NormalDist().inv_cdf(1 - alpha / 2)
    crit2 = crit**2
    q = successes / n
    denom = 1 + crit2 / n
    center = (q + crit2 / (2 * n)) / denom
    dist = crit * math.sqrt(q * (1.0 - q) / n + crit2 / (4.0 * n**2)) / denom
    low = 0.0 if successes == 0 else min(max(center - dist, 0.0), 1.0)  # exact at the ends
    high = 1.0 if successes == n else min(max(center + dist, 0.0), 1.0)
    return (low, high)


def rate_row(passed: int, scored: int) -> dict[str, Any]:
    """A pass rate as the reports write it: passed, scored, rate and its Wilson 95% interval
    (None where undefined, scored == 0)."""
    low, high = wilson_interval(passed, scored)
    return {"passed": passed, "scored": scored,
            "rate": passed / scored if scored else None,
            "ci_low": None if math.isnan(low) else low,
            "ci_high": None if math.isnan(high) else high}


def wilson_arrays(
    successes: npt.ArrayLike, n: npt.ArrayLike, alpha: float = 0.05
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Vectorised `wilson_interval` (nan where n == 0)."""
    s = np.asarray(successes, dtype=np.float64)
    nn = np.asarray(n, dtype=np.float64)
    crit = NormalDist().inv_cdf(1 - alpha / 2)
    crit2 = crit**2
    with np.errstate(divide="ignore", invalid="ignore"):
        q = s / nn
        denom = 1 + crit2 / nn
        center = (q + crit2 / (2 * nn)) / denom
        dist = crit * np.sqrt(q * (1.0 - q) / nn + crit2 / (4.0 * nn**2)) / denom
    low = np.where(s == 0, 0.0, np.clip(center - dist, 0.0, 1.0))
    high = np.where(s == nn, 1.0, np.clip(center + dist, 0.0, 1.0))
    nan = nn <= 0
    return np.where(nan, np.nan, low), np.where(nan, np.nan, high)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with n attempts of which c passed: 1 - C(n-c,k)/C(n,k)."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def mean_pass_at_k(ns: Sequence[int], cs: Sequence[int], k: int) -> tuple[float, int]:
    """Mean pass@k over the tasks with at least k attempts, and how many tasks that was."""
    cache: dict[tuple[int, int], float] = {}
    total = 0.0
    count = 0
    for n, c in zip(ns, cs, strict=True):
        if n < k:
            continue
        key = (int(n), int(c))
        if key not in cache:
            cache[key] = pass_at_k(key[0], key[1], k)
        total += cache[key]
        count += 1
    return (total / count if count else math.nan, count)


@dataclass(frozen=True)
class McNemarResult:
    b: int  # A passed, B failed
    c: int  # A failed, B passed
    exact: bool
    statistic: float
    pvalue: float

    @property
    def test(self) -> str:
        if self.exact:
            return "exact binomial (two-sided)"
        return "chi-square with continuity correction"


def mcnemar_test(b: int, c: int, exact_below: int = EXACT_MCNEMAR_BELOW) -> McNemarResult:
    """McNemar's test on the discordant counts b (A only) and c (B only), by statsmodels.

    Exact (two-sided binomial, p = min(1, 2 * P[X <= min(b, c)]), X ~ Bin(b + c, 1/2)) when
    b + c < exact_below, else chi-square with continuity correction, (|b - c| - 1)^2 / (b + c)
    on 1 degree of freedom: `statsmodels.stats.contingency_tables.mcnemar(table, exact=...,
    correction=True)`. The concordant cells do not enter the test. With no discordant pair,
    p = 1.0 (statsmodels would divide by zero in the chi-square form).
    """
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be non-negative")
    n = b + c
    exact = n < exact_below
    if n == 0:
        return McNemarResult(b, c, exact, 0.0, 1.0)
    from statsmodels.stats.contingency_tables import mcnemar  # scipy: seconds; paired only

    res = mcnemar([[0, b], [c, 0]], exact=exact, correction=True)
    return McNemarResult(b, c, exact, float(res.statistic), min(1.0, float(res.pvalue)))


@dataclass(frozen=True)
class BootstrapResult:
    estimate: float  # observed difference B - A
    ci_low: float
    ci_high: float
    confidence: float
    resamples: int
    seed: int


def bootstrap_distribution(
    diff_sums: npt.ArrayLike, weights: npt.ArrayLike, resamples: int, seed: int
) -> npt.NDArray[np.float64]:
    """Bootstrap replicates of sum(diff) / sum(weight), resampling tasks with replacement.

    Each task contributes `diff_sums[t]` (sum over its pairs of B - A, each 0/1) and
    `weights[t]` (its number of pairs). Tasks are discrete, so resampling T tasks uniformly
    with replacement is the same, in distribution, as a multinomial draw of T over the distinct
    (diff, weight) task types with their observed frequencies: that draw costs O(resamples x
    types) instead of O(resamples x T) and makes 100k tasks cheap. Seeded, hence reproducible.
    """
    d = np.asarray(diff_sums, dtype=np.int64)
    w = np.asarray(weights, dtype=np.int64)
    if d.shape != w.shape or d.ndim != 1:
        raise ValueError("diff_sums and weights must be 1-d arrays of equal length")
    if len(d) == 0:
        return np.full(resamples, np.nan)
    base = int(w.max()) + 1  # one integer per (diff, weight) type: |diff| <= weight < base
    keys, counts = np.unique((d + base) * base + w, return_counts=True)
    type_d, type_w = keys // base - base, keys % base
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(len(d), counts / counts.sum(), size=resamples)
    num = draws @ type_d.astype(np.float64)
    den = draws @ type_w.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(num / den, dtype=np.float64)


def paired_bootstrap(
    diff_sums: npt.ArrayLike,
    weights: npt.ArrayLike,
    resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Percentile bootstrap CI for the pass-rate difference B - A over tasks."""
    d = np.asarray(diff_sums, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    estimate = float(d.sum() / w.sum()) if w.sum() > 0 else math.nan
    dist = bootstrap_distribution(diff_sums, weights, resamples, seed)
    low, high = percentile_interval(dist, confidence)
    return BootstrapResult(estimate, low, high, confidence, resamples, seed)


def percentile_interval(dist: npt.NDArray[np.float64], confidence: float) -> tuple[float, float]:
    """Two-sided percentile interval of bootstrap replicates; (nan, nan) if there are none."""
    if len(dist) == 0 or np.isnan(dist).any():
        return (math.nan, math.nan)
    tail = (1 - confidence) / 2
    low, high = np.quantile(dist, [tail, 1 - tail])
    return (float(low), float(high))


def one_sided_upper(dist: npt.NDArray[np.float64], confidence: float) -> float:
    """Upper bound of a one-sided percentile interval at `confidence`."""
    if len(dist) == 0 or np.isnan(dist).any():
        return math.nan
    return float(np.quantile(dist, confidence))


def describe(values: npt.ArrayLike) -> dict[str, float | int | None]:
    """count, median, p25, p75, max (None when empty)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    if len(v) == 0:
        return {"count": 0, "median": None, "p25": None, "p75": None, "max": None}
    p25, med, p75 = np.percentile(v, [25, 50, 75])
    return {"count": int(len(v)), "median": float(med), "p25": float(p25), "p75": float(p75),
            "max": float(v.max())}


def clopper_pearson(x: float, n: float, tail: float) -> tuple[float, float]:
    """One-sided Clopper-Pearson bounds (lower, upper) of a proportion from x events in n
    attempts, each bound with error probability `tail`: the beta quantiles of statsmodels'
    `proportion_confint(x, n, alpha=2 * tail, method="beta")`, lower 0 at x = 0 and upper 1
    at x = n. x may be fractional (counts scaled to tasks, see `exact_section`)."""
    if n <= 0:
        return (0.0, 1.0)
    from scipy.stats import beta  # scipy: paired report and gate only

    lower = 0.0 if x <= 0 else float(beta.ppf(tail, x, n - x + 1))
    upper = 1.0 if x >= n else float(beta.ppf(1 - tail, x + 1, n - x))
    return (lower, upper)


def exact_difference_bounds(plus: float, minus: float, n: float,
                            alpha: float) -> tuple[float, float]:
    """One-sided (1 - alpha) lower and upper bounds of p_plus - p_minus, where `plus` of n
    units went one way and `minus` the other (the rest tied): with each proportion's
    Clopper-Pearson bounds at alpha / 2 (Bonferroni), upper = CP_up(plus) - CP_low(minus) and
    lower = CP_low(plus) - CP_up(minus). Exact (conservative) at every sample size; with no unit
    going either way the upper bound is 1 - (alpha / 2)^(1 / n)."""
    p_low, p_up = clopper_pearson(plus, n, alpha / 2)
    m_low, m_up = clopper_pearson(minus, n, alpha / 2)
    return (p_low - m_up, p_up - m_low)


def exact_section(a_only: int, b_only: int, pairs: int, tasks: int, a_only_tasks: int,
                  b_only_tasks: int, alpha: float) -> dict[str, Any]:
    """The exact bounds of the drop A - B for the paired report and the gate.

    With several pairs per task the counts are scaled to the tasks (x tasks / pairs: the
    effective sample size at ICC = 1, the conservative case `plan` also takes when the ICC is
    unknown), so attempts of one task are not counted as independent evidence.
    `bootstrap_alone` says whether enough tasks disagree each way for the bootstrap's bounds to
    stand alone (the small-sample rule in the module docstring)."""
    scale = tasks / pairs if pairs else 1.0
    plus, minus = a_only * scale, b_only * scale
    drop_lower, drop_upper = exact_difference_bounds(plus, minus, tasks, alpha)
    two_low, two_high = exact_difference_bounds(plus, minus, tasks, alpha / 2)
    alone = min(a_only_tasks, b_only_tasks) >= BOOTSTRAP_MIN_PER_SIDE
    return {
        "method": "Clopper-Pearson bound of each discordant proportion, Bonferroni"
                  + (" (counts scaled to tasks)" if scale < 1 else ""),
        "units": tasks, "a_only_units": plus, "b_only_units": minus,
        "a_only_tasks": a_only_tasks, "b_only_tasks": b_only_tasks,
        "drop_upper": drop_upper, "drop_lower": drop_lower,
        "ci_low": -two_high, "ci_high": -two_low,  # two-sided, for B - A
        "bootstrap_alone": alone,
        "rule": (f"the bootstrap's bounds stand alone with at least {BOOTSTRAP_MIN_PER_SIDE} "
                 "tasks having a pair go each way; here "
                 f"{a_only_tasks} favour A and {b_only_tasks} favour B"
                 + ("" if alone else ", so they are widened to the exact bounds")),
    }
