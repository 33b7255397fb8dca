"""The statistics against independent references: statsmodels, textbook values, brute force."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

import pytest_agentbench.reporting.stats as stats

# --- Wilson ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("successes", "n"), [
    (0, 10), (10, 10), (7, 10), (0, 1), (1, 1), (1, 2), (50, 100), (3, 1000), (999, 1000),
    (12345, 54321), (5, 7),
])
def test_wilson_equals_statsmodels(successes: int, n: int) -> None:
    low, high = stats.wilson_interval(successes, n)
    ref_low, ref_high = proportion_confint(successes, n, alpha=0.05, method="wilson")
    assert low == pytest.approx(ref_low, abs=1e-12)
    assert high == pytest.approx(ref_high, abs=1e-12)


def test_wilson_textbook_values() -> None:
    # Wilson 95% intervals (z = 1.959964): 0/10, 10/10 and 7/10
    assert stats.wilson_interval(0, 10) == pytest.approx((0.0, 0.27753), abs=1e-5)
    assert stats.wilson_interval(10, 10) == pytest.approx((0.72247, 1.0), abs=1e-5)
    assert stats.wilson_interval(7, 10) == pytest.approx((0.39678, 0.89221), abs=1e-5)
    low, high = stats.wilson_interval(0, 10)
    assert low == 0.0 and stats.wilson_interval(10, 10)[1] == 1.0


def test_wilson_other_alpha_and_arrays() -> None:
    assert stats.wilson_interval(7, 10, alpha=0.1) == pytest.approx(
        proportion_confint(7, 10, alpha=0.1, method="wilson"), abs=1e-12)
    s, n = np.array([0, 3, 10, 0]), np.array([10, 10, 10, 0])
    lows, highs = stats.wilson_arrays(s, n)
    for i in range(3):
        assert (lows[i], highs[i]) == pytest.approx(stats.wilson_interval(int(s[i]), int(n[i])))
    assert math.isnan(lows[3]) and math.isnan(highs[3])


def test_wilson_edge_input() -> None:
    assert all(math.isnan(x) for x in stats.wilson_interval(0, 0))
    with pytest.raises(ValueError):
        stats.wilson_interval(11, 10)


# --- McNemar --------------------------------------------------------------------------------

def test_mcnemar_textbook_exact() -> None:
    res = stats.mcnemar_test(1, 9)
    assert res.exact and res.test.startswith("exact")
    assert res.pvalue == 0.021484375  # 2 * (1 + 9) / 2**10
    assert res.statistic == 1.0


@pytest.mark.parametrize(("b", "c"), [
    (b, c) for b in (0, 1, 2, 5, 9, 12, 20, 30, 60) for c in (0, 1, 3, 8, 13, 24, 40, 75)
])
def test_mcnemar_equals_statsmodels(b: int, c: int) -> None:
    res = stats.mcnemar_test(b, c)
    assert res.exact == (b + c < 25)
    if b + c == 0:
        assert res.pvalue == 1.0
        return
    ref = mcnemar([[7, b], [c, 4]], exact=res.exact, correction=True)
    assert res.pvalue == pytest.approx(min(1.0, float(ref.pvalue)), abs=1e-12, rel=1e-12)
    assert res.statistic == pytest.approx(float(ref.statistic), abs=1e-12)
    # and against the textbook formulas, independent of statsmodels and scipy
    n = b + c
    if res.exact:
        tail = Fraction(sum(math.comb(n, i) for i in range(min(b, c) + 1)), 2**n)
        expected = float(min(Fraction(1), 2 * tail))
    else:
        expected = math.erfc(math.sqrt((abs(b - c) - 1.0) ** 2 / n / 2))
    assert res.pvalue == pytest.approx(expected, abs=1e-12, rel=1e-12)


def test_mcnemar_threshold_and_chi2_value() -> None:
    assert stats.mcnemar_test(12, 12).exact and stats.mcnemar_test(12, 12).pvalue == 1.0
    assert not stats.mcnemar_test(20, 5).exact
    res = stats.mcnemar_test(20, 10)  # (|20 - 10| - 1)^2 / 30 = 2.7
    assert res.statistic == pytest.approx(2.7)
    assert res.pvalue == pytest.approx(0.10034824646229054, abs=1e-12)


def test_mcnemar_no_discordant_pairs() -> None:
    res = stats.mcnemar_test(0, 0)
    assert res.pvalue == 1.0 and res.exact


# --- pass@k ---------------------------------------------------------------------------------

def _brute_pass_at_k(n: int, c: int, k: int) -> float:
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize(("n", "c", "k"), [
    (n, c, k) for n in range(1, 8) for c in range(n + 1) for k in range(1, n + 1)
])
def test_pass_at_k_unbiased_matches_enumeration(n: int, c: int, k: int) -> None:
    assert stats.pass_at_k(n, c, k) == pytest.approx(_brute_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_values_and_k_equals_n() -> None:
    assert stats.pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert stats.pass_at_k(10, 3, 2) == pytest.approx(1 - 21 / 45)
    assert stats.pass_at_k(5, 1, 5) == 1.0  # k = n: passes iff any attempt passed
    assert stats.pass_at_k(5, 0, 5) == 0.0
    # the numerically stable product form of Chen et al. (2021)
    n, c, k = 200, 13, 10
    ref = 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))
    assert stats.pass_at_k(n, c, k) == pytest.approx(ref, abs=1e-12)
    with pytest.raises(ValueError):
        stats.pass_at_k(3, 1, 4)
    with pytest.raises(ValueError):
        stats.pass_at_k(3, 4, 1)


def test_mean_pass_at_k_counts_only_tasks_with_enough_attempts() -> None:
    value, tasks = stats.mean_pass_at_k([3, 3, 1], [1, 0, 1], 2)
    assert tasks == 2
    assert value == pytest.approx((stats.pass_at_k(3, 1, 2) + 0.0) / 2)


# --- bootstrap ------------------------------------------------------------------------------

def test_bootstrap_reproducible_with_seed() -> None:
    d = np.array([1, 0, 0, -1, 1, 1, 0, 0, 1, 0])
    w = np.ones_like(d)
    a = stats.paired_bootstrap(d, w, resamples=2000, seed=42)
    b = stats.paired_bootstrap(d, w, resamples=2000, seed=42)
    c = stats.paired_bootstrap(d, w, resamples=2000, seed=43)
    assert a == b and a.seed == 42 and a.resamples == 2000
    assert np.array_equal(stats.bootstrap_distribution(d, w, 500, 7),
                          stats.bootstrap_distribution(d, w, 500, 7))
    assert (a.ci_low, a.ci_high) != (c.ci_low, c.ci_high) or a.estimate == c.estimate
    assert a.estimate == pytest.approx(0.3)
    assert a.ci_low <= a.estimate <= a.ci_high


def test_bootstrap_matches_naive_task_resampling_in_distribution() -> None:
    rng = np.random.default_rng(0)
    weights = rng.integers(1, 4, 60)
    diffs = np.array([rng.integers(-w, w + 1) for w in weights])
    fast = stats.bootstrap_distribution(diffs, weights, 20_000, seed=1)
    idx = np.random.default_rng(2).integers(0, len(diffs), (20_000, len(diffs)))
    naive = diffs[idx].sum(axis=1) / weights[idx].sum(axis=1)
    assert fast.mean() == pytest.approx(naive.mean(), abs=0.005)
    assert fast.std() == pytest.approx(naive.std(), rel=0.05)
    for q in (0.025, 0.5, 0.975):
        assert np.quantile(fast, q) == pytest.approx(np.quantile(naive, q), abs=0.02)


def test_bootstrap_degenerate_cases() -> None:
    same = stats.paired_bootstrap(np.zeros(5), np.ones(5), 100, 0)
    assert (same.estimate, same.ci_low, same.ci_high) == (0.0, 0.0, 0.0)
    empty = stats.paired_bootstrap(np.array([]), np.array([]), 100, 0)
    assert math.isnan(empty.estimate) and math.isnan(empty.ci_low)
    assert math.isnan(stats.one_sided_upper(np.array([]), 0.95))


def test_describe() -> None:
    assert stats.describe([])["median"] is None
    d = stats.describe([1.0, 2.0, 3.0, 4.0, float("nan")])
    assert d == {"count": 4, "median": 2.5, "p25": 1.75, "p75": 3.25, "max": 4.0}
