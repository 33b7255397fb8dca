"""Issue 26 item 2: the sequential test, simulated over thousands of paired runs (pure numpy).

Under no difference, looked at after every task: its false REGRESSION rate stays at or below
alpha, while the gate's fixed-sample tests looked at the same way exceed it. Under a real drop:
how often and how soon it stops, beside the fixed sample size `plan` asks for. The figures
printed here are the README's (`pytest -s` shows them).
"""

from __future__ import annotations

import numpy as np
import pytest

import pytest_agentbench.reporting.sequential as sequential
from pytest_agentbench.reporting.power import pairs_needed
from pytest_agentbench.reporting.sequential_sim import (
    Scenario,
    fixed_peeking,
    paired_drops,
    sequential_stops,
    simulate,
)

ALPHA = 0.05
RUNS, TASKS = 2000, 500


@pytest.mark.parametrize("psi", [0.1, 0.3, 0.6])
def test_no_difference_peeking_after_every_task(psi: float) -> None:
    """mu = 0 = threshold: the boundary of both hypotheses, where each error is largest."""
    r = simulate(Scenario(psi / 2, psi / 2), 0.0, ALPHA, TASKS, RUNS, seed=int(psi * 100))
    print(f"\nno difference, discordance {psi:.0%}, {RUNS} runs x {TASKS} tasks, peeking after "
          f"every task: sequential REGRESSION {r['sequential_regression']:.3f}, OK "
          f"{r['sequential_ok']:.3f}; fixed sign test {r['fixed_sign_peeking']:.3f}, "
          f"McNemar {r['fixed_mcnemar_peeking']:.3f}; sign test once at the end "
          f"{r['fixed_sign_at_end']:.3f}")
    assert r["sequential_regression"] <= ALPHA
    assert r["sequential_ok"] <= ALPHA
    assert r["fixed_sign_peeking"] > 2 * ALPHA  # peeking at a fixed-sample test: false alarms
    assert r["fixed_mcnemar_peeking"] > ALPHA
    assert r["fixed_sign_at_end"] <= ALPHA  # the same test looked at once is fine


def test_equal_runs_are_not_stopped_as_a_regression_at_the_default_threshold() -> None:
    """A candidate equal to its baseline, the gate's default max drop (5 points): the false
    REGRESSION rate is far below alpha (the bound alpha holds at a true drop of 5 points)."""
    rates = []
    for seed in range(5):
        r = simulate(Scenario(0.15, 0.15), sequential.threshold_of(None, None), ALPHA, TASKS,
                     RUNS, seed=100 + seed)
        rates.append(r["sequential_regression"])
        print(f"\nequal runs, seed {100 + seed}: REGRESSION {r['sequential_regression']:.4f}, "
              f"OK {r['sequential_ok']:.3f} (median stop {r['median_stop']})")
    print(f"equal runs: {round(sum(rates) * RUNS)} false REGRESSION(s) in {5 * RUNS}")
    assert max(rates) <= ALPHA / 25, rates
    assert sum(rates) * RUNS <= 10  # a few in 10,000 (alpha would allow 500)


def test_power_and_stopping_size_against_a_real_drop() -> None:
    big = simulate(Scenario(0.48, 0.08), 0.05, ALPHA, 200, RUNS, seed=7)  # 80% vs 40%
    print(f"\n40-point drop (80% vs 40%), threshold 5 points: REGRESSION in "
          f"{big['sequential_regression']:.3f} of runs, median stop {big['median_stop']:.0f} "
          f"tasks, 90th percentile {big['p90_stop']:.0f}")
    assert big["sequential_regression"] >= 0.99
    assert big["median_stop"] <= 40
    fixed = pairs_needed(0.10, 0.30, ALPHA, 0.8)  # plan's size for this design, one attempt
    ten = simulate(Scenario(0.20, 0.10), 0.0, ALPHA, 4 * fixed, RUNS, seed=8)
    within = _share_by(Scenario(0.20, 0.10), fixed, seed=8)
    print(f"10-point drop, discordance 30%, threshold 0: plan's fixed size {fixed} tasks; "
          f"sequential median stop {ten['median_stop']:.0f}, 90th percentile "
          f"{ten['p90_stop']:.0f}, REGRESSION by {fixed} tasks in {within:.3f} of runs, by "
          f"{4 * fixed} in {ten['sequential_regression']:.3f}")
    assert ten["sequential_regression"] >= 0.95
    assert ten["median_stop"] < 1.5 * fixed
    assert ten["sequential_ok"] == 0.0


def _share_by(scenario: Scenario, tasks: int, seed: int) -> float:
    x = paired_drops(np.random.default_rng(seed), RUNS, tasks, scenario.p10, scenario.p01)
    reg, ok = sequential_stops(x, 0.0, ALPHA)
    return float(((reg <= tasks) & (reg <= ok)).mean())


def test_the_vectorised_stops_are_decide_run_by_run() -> None:
    """sequential_stops (the simulation's) and decide (the plugin's and the gate's) agree."""
    x = paired_drops(np.random.default_rng(3), 200, 120, 0.3, 0.1)
    reg, ok = sequential_stops(x, 0.05, ALPHA)
    fixed = fixed_peeking(x, ALPHA)
    for row, r, o in zip(x, reg, ok, strict=True):
        d = sequential.decide(row, 0.05, ALPHA)
        if r <= 120 and r <= o:
            assert (d.outcome, d.tasks) == ("regression", r)
        elif o <= 120:
            assert (d.outcome, d.tasks) == ("ok", o)
        else:
            assert (d.outcome, d.tasks) == ("inconclusive", 120)
    assert fixed["sign"].shape == (200,)
