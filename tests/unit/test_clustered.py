"""pass^k, the pass rate clustered by task and the cost per solved task (reporting/clustered.py),
against hand-computed fixtures, brute-force enumeration and statsmodels (to 1e-9)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import statsmodels.api as sm
from statsmodels.stats.proportion import proportion_confint

import pytest_agentbench.reporting.clustered as cl


def _brute_pass_hat_k(n: int, c: int, k: int) -> float:
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(all(outcomes[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize(("n", "c", "k"), [
    (n, c, k) for n in range(1, 8) for c in range(n + 1) for k in range(1, n + 1)
])
def test_pass_hat_k_matches_enumeration(n: int, c: int, k: int) -> None:
    assert cl.pass_hat_k(n, c, k) == pytest.approx(_brute_pass_hat_k(n, c, k), abs=1e-12)


def test_pass_hat_k_hand_values() -> None:
    assert cl.pass_hat_k(3, 2, 2) == pytest.approx(1 / 3)  # C(2,2)/C(3,2)
    assert cl.pass_hat_k(5, 3, 2) == pytest.approx(3 / 10)  # C(3,2)/C(5,2)
    assert cl.pass_hat_k(4, 1, 2) == 0.0  # fewer passes than k
    assert cl.pass_hat_k(10, 7, 1) == pytest.approx(0.7)  # k = 1: the pass rate
    assert cl.pass_hat_k(4, 4, 4) == 1.0
    with pytest.raises(ValueError):
        cl.pass_hat_k(3, 1, 4)
    with pytest.raises(ValueError):
        cl.pass_hat_k(3, 4, 1)


def test_pass_k_rows_average_over_tasks_with_enough_attempts() -> None:
    # tasks (n, c): (2, 1) and (4, 3)
    rows = cl.pass_k_rows([2, 4], [1, 3])
    assert [r["k"] for r in rows] == [1, 2, 3, 4]
    assert [r["tasks"] for r in rows] == [2, 2, 1, 1]
    hat = [r["pass_hat_k"] for r in rows]
    assert hat == pytest.approx([(1 / 2 + 3 / 4) / 2, (0 + 3 / 6) / 2, 1 / 4, 0.0], abs=1e-12)
    at = [r["value"] for r in rows]
    assert at == pytest.approx([(1 / 2 + 3 / 4) / 2, (1 + 1) / 2, 1.0, 1.0], abs=1e-12)
    # (3, 1), (3, 0), (3, 3): the summary test's fixture
    hat3 = [r["pass_hat_k"] for r in cl.pass_k_rows([3, 3, 3], [1, 0, 3])]
    assert hat3 == pytest.approx([(1 / 3 + 0 + 1) / 3, 1 / 3, 1 / 3], abs=1e-12)
    assert cl.pass_k_rows([1, 1], [1, 0]) == [] and cl.pass_k_rows([], []) == []


def _attempts(n: list[int], c: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """0/1 outcomes per attempt and their task (cluster) labels."""
    y, g = [], []
    for task, (tn, tc) in enumerate(zip(n, c, strict=True)):
        y += [1.0] * tc + [0.0] * (tn - tc)
        g += [task] * tn
    return np.array(y), np.array(g)


def _statsmodels_cluster(n: list[int], c: list[int]) -> tuple[float, float, float]:
    y, g = _attempts(n, c)
    fit = sm.OLS(y, np.ones((len(y), 1))).fit(cov_type="cluster", cov_kwds={"groups": g},
                                              use_t=True)  # t with G - 1 degrees of freedom
    low, high = fit.conf_int(alpha=0.05)[0]
    return float(fit.bse[0]), float(low), float(high)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_cr1_standard_error_equals_statsmodels(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tasks = int(rng.integers(3, 60))
    n = rng.integers(1, 9, tasks)
    c = rng.binomial(n, rng.beta(1, 1, tasks))
    n[0], c[0] = 5, 2  # at least one task with several attempts, not all passing
    se_ref, low_ref, high_ref = _statsmodels_cluster(n.tolist(), c.tolist())
    assert cl.cr1_se(n, c) == pytest.approx(se_ref, abs=1e-9)
    got = cl.clustered_rate(n, c)
    assert got is not None and got["method"] == "cr1"
    assert got["se"] == pytest.approx(se_ref, abs=1e-9)
    if low_ref > 0.0 and high_ref < 1.0:  # ours is clipped to [0, 1]
        assert (got["ci_low"], got["ci_high"]) == pytest.approx((low_ref, high_ref), abs=1e-9)
    p = c.sum() / n.sum()
    assert got["design_effect"] == pytest.approx(se_ref**2 / (p * (1 - p) / n.sum()), rel=1e-9)


def test_cr1_hand_computed() -> None:
    # two tasks: 2/2 and 0/2; p = 1/2, residual sums +1 and -1: meat 2, G/(G-1) = 2, N = 4
    assert cl.cr1_se([2, 2], [2, 0]) == pytest.approx(math.sqrt(2 * 2) / 4)
    assert math.isnan(cl.cr1_se([3], [1]))


def test_clustered_rate_absent_with_one_attempt_per_task_or_one_task() -> None:
    assert cl.clustered_rate([1, 1, 1], [1, 0, 1]) is None
    assert cl.clustered_rate([4], [2]) is None


def test_clustered_rate_wilson_over_tasks_when_the_error_is_zero() -> None:
    got = cl.clustered_rate([3, 3, 3, 3], [3, 3, 3, 3])  # every attempt passed
    assert got is not None and got["method"] == "wilson_tasks" and got["se"] == 0.0
    assert (got["ci_low"], got["ci_high"]) == pytest.approx(
        proportion_confint(4, 4, method="wilson"), abs=1e-12)
    assert got["design_effect"] == 3.0 and got["effective_n"] == 4.0


def test_cost_per_pass_none_safe() -> None:
    assert cl.cost_per_pass([], [])["value"] is None
    none = cl.cost_per_pass([1.0, 2.0], [0, 0])
    assert none["value"] is None and none["ci_low"] is None and none["method"] is None
    one = cl.cost_per_pass([3.0], [2])
    assert one["value"] == 1.5 and one["ci_low"] is None


def test_cost_per_pass_bootstrap_is_seeded_and_brackets_the_value() -> None:
    rng = np.random.default_rng(7)
    cost = rng.gamma(2.0, 0.1, 300)
    passes = rng.integers(0, 4, 300)
    a = cl.cost_per_pass(cost, passes, seed=3)
    b = cl.cost_per_pass(cost, passes, seed=3)
    assert a == b and a["method"] == "cluster_bootstrap_percentile"
    assert a["value"] == pytest.approx(cost.sum() / passes.sum())
    assert a["ci_low"] < a["value"] < a["ci_high"]
    assert cl.cost_per_pass(cost, passes, seed=4) != a


def test_cost_per_pass_bootstrap_and_delta_method_agree_on_many_tasks() -> None:
    rng = np.random.default_rng(11)
    tasks = 3000
    cost = rng.gamma(2.0, 0.1, tasks)
    passes = rng.binomial(3, 0.4, tasks)
    boot = cl.cost_per_pass(cost, passes, seed=1, resamples=2000)
    delta = cl.cost_per_pass(cost, passes, bootstrap_max_tasks=tasks - 1)
    assert delta["method"] == "delta_cluster_robust"
    width = delta["ci_high"] - delta["ci_low"]
    assert boot["ci_low"] == pytest.approx(delta["ci_low"], abs=0.05 * width)
    assert boot["ci_high"] == pytest.approx(delta["ci_high"], abs=0.05 * width)


def test_cost_per_pass_unbounded_when_resamples_often_hold_no_pass() -> None:
    got = cl.cost_per_pass([1.0, 1.0, 1.0], [1, 0, 0], seed=0)
    assert got["value"] == 3.0 and got["ci_high"] is None  # (2/3)^3 of resamples: no pass
