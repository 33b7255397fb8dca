"""Sample size and minimum detectable effect for a paired comparison of two pass rates.

Pairs (A attempt, B attempt) are compared by McNemar's test, which looks only at the discordant
pairs: p10 = P(A passes, B fails), p01 = P(A fails, B passes). The effect is the difference in
pass rate delta = p01 - p10 (B - A) and psi = p10 + p01 the discordant proportion (|delta| <= psi).

`pairs_needed` is Connor's closed form (Connor 1987, "Sample size for testing differences in
proportions for the paired-sample design", Biometrics 43:207-211; the same expression as
Miettinen 1968 and Lachin 1992, "Power and sample size evaluation for the McNemar test with
application to matched case-control studies", Stat Med 11:1239) for the two-sided McNemar test
without continuity correction at level alpha and the given power:

    n = [ z_{1-alpha/2} * sqrt(psi) + z_{power} * sqrt(psi - delta^2) ]^2 / delta^2

Checked by simulation (tests/unit/test_power.py: statsmodels' mcnemar, no correction, 2000
samples): the power reached is within 0.02 of the target when the discordant pairs are not too
lopsided, and above it (conservative, e.g. 0.84 for a target 0.8 at p10 = 0.03, p01 = 0.10) when
nearly all go one way. The reports' own McNemar adds a continuity correction (and is exact below
25 discordant pairs), which costs a little power against this formula.

`minimum_detectable_effect` solves the same equation for delta at a given n. The discordance
under an effect is at least the effect itself (every discordant pair going one way), so the MDE
uses psi(delta) = max(psi, delta): with psi = 0 observed (identical runs) the MDE is still
finite, the smallest delta such that n pairs discordant at rate delta, all one way, would be
detected. n_needed(delta) is decreasing in delta on (0, 1], so a bisection finds it; None when
even delta = 1 needs more pairs than n (n < z_{1-alpha/2}^2 ~ 3.84 at alpha 0.05).

Several attempts per task are correlated (clustered by task). The design effect
1 + (m - 1) * ICC (Kish 1965; Donner and Klar 2000) inflates the pairs needed as if independent;
m is the attempts per task, ICC the intraclass correlation of the per-pair outcome within a task,
estimated by `anova_icc` (one-way ANOVA estimator, unbalanced clusters: Donner 1986). Tasks =
ceil(n * design_effect / m).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

FORMULA = ("n = [z(1-alpha/2)*sqrt(psi) + z(power)*sqrt(psi - delta^2)]^2 / delta^2 "
           "(Connor 1987; Miettinen 1968; Lachin 1992)")
DESIGN_EFFECT = "design effect = 1 + (m - 1) * ICC (m attempts per task)"
MDE_POWER = 0.8


def _z(p: float) -> float:
    return NormalDist().inv_cdf(p)


def _check(alpha: float, power: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power}")


def pairs_needed_exact(delta: float, psi: float, alpha: float = 0.05,
                       power: float = 0.8) -> float:
    """Connor's n, not rounded up (see the module docstring)."""
    _check(alpha, power)
    d = abs(delta)
    if not 0 < d <= 1:
        raise ValueError(f"the effect must be in (0, 1], got {delta}")
    if not d <= psi <= 1:
        raise ValueError(f"the discordant proportion psi = {psi:.4g} must lie in [|delta|, 1] "
                         f"= [{d:.4g}, 1]: an effect of {d:.4g} makes at least that many pairs "
                         "discordant")
    root = _z(1 - alpha / 2) * math.sqrt(psi) + _z(power) * math.sqrt(max(psi - d * d, 0.0))
    return root * root / (d * d)


def pairs_needed(delta: float, psi: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Independent pairs needed to detect delta with the two-sided McNemar test (Connor 1987)."""
    return math.ceil(pairs_needed_exact(delta, psi, alpha, power) - 1e-9)


def minimum_detectable_effect(n: float, psi: float, alpha: float = 0.05,
                              power: float = MDE_POWER) -> float | None:
    """Smallest |delta| that n independent pairs detect with the given power, with the
    discordance psi(delta) = max(psi, delta); None when no delta <= 1 is detectable."""
    _check(alpha, power)
    if not n > 0 or not 0 <= psi <= 1:
        return None

    def need(d: float) -> float:
        return pairs_needed_exact(d, max(psi, d), alpha, power)

    if need(1.0) > n:
        return None
    low, high = 0.0, 1.0  # need(low) > n (need -> inf as delta -> 0), need(high) <= n
    for _ in range(60):
        mid = (low + high) / 2
        if need(mid) > n:
            low = mid
        else:
            high = mid
    return high


def anova_icc(values: npt.ArrayLike, clusters: npt.ArrayLike) -> float | None:
    """One-way ANOVA intraclass correlation of `values` grouped by `clusters`, clipped to
    [0, 1]: (MSB - MSW) / (MSB + (m0 - 1) MSW), m0 = (N - sum n_k^2 / N) / (K - 1).

    None when it cannot be estimated: fewer than two clusters, no cluster with two values, or
    nothing varies at all (every value equal: the ratio is 0/0, undefined, not 0; callers then
    take the conservative ICC = 1 of an unknown one).
    """
    y = np.asarray(values, dtype=np.float64)
    _, codes = np.unique(np.asarray(clusters), return_inverse=True)
    sizes = np.bincount(codes).astype(np.float64)
    k, total = len(sizes), float(len(y))
    if k < 2 or total <= k:
        return None
    means = np.bincount(codes, weights=y) / sizes
    grand = y.mean()
    msb = float((sizes * (means - grand) ** 2).sum() / (k - 1))
    msw = float(((y - means[codes]) ** 2).sum() / (total - k))
    m0 = (total - float((sizes**2).sum()) / total) / (k - 1)
    denom = msb + (m0 - 1) * msw
    if denom <= 0:  # msb = msw = 0: no variance anywhere
        return None
    return float(min(max((msb - msw) / denom, 0.0), 1.0))


def design_effect(attempts: float, icc: float | None) -> float:
    """1 + (m - 1) * ICC; an unknown ICC counts as 1 (extra attempts add nothing)."""
    return 1.0 + (max(attempts, 1.0) - 1.0) * (1.0 if icc is None else icc)


@dataclass(frozen=True)
class SampleSize:
    tasks: int
    attempts: int
    pairs: int  # tasks * attempts
    independent_pairs: int  # Connor's n before the design effect
    design_effect: float


def tasks_needed(delta: float, psi: float, alpha: float = 0.05, power: float = 0.8,
                 attempts: int = 1, icc: float | None = None) -> SampleSize:
    """Tasks x attempts: Connor's n inflated by the design effect, spread over `attempts`."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    n = pairs_needed_exact(delta, psi, alpha, power)
    deff = design_effect(attempts, icc)
    tasks = math.ceil(n * deff / attempts - 1e-9)
    return SampleSize(tasks=tasks, attempts=attempts, pairs=tasks * attempts,
                      independent_pairs=math.ceil(n - 1e-9), design_effect=deff)
