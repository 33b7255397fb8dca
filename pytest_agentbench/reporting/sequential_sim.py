"""Simulated paired runs for the sequential test (sequential.py): its error rates when looked at
after every task, against fixed-sample tests looked at the same way, and its stopping size for
`agentbench plan`.

One attempt per task: task t is discordant in the baseline's favour (x = +1, baseline passed,
candidate failed) with probability p10, in the candidate's (x = -1) with p01, else x = 0. Tasks in
a random order are i.i.d., so a task-level mixture of pass probabilities reduces to this
(p10, p01) model. Everything is vectorised over simulated runs (numpy; scipy for binomial tails).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import pytest_agentbench.reporting.sequential as sequential
from pytest_agentbench.reporting.stats import EXACT_MCNEMAR_BELOW

Ints = npt.NDArray[np.int64]


def paired_drops(rng: np.random.Generator, runs: int, tasks: int, p10: float,
                 p01: float) -> npt.NDArray[np.float64]:
    """`runs` x `tasks` per-task drops in {-1, 0, 1}."""
    u = rng.random((runs, tasks))
    return np.where(u < p10, 1.0, np.where(u < p10 + p01, -1.0, 0.0))


def first_true(hit: npt.NDArray[np.bool_]) -> Ints:
    """Per row, the index of the first True, or the row length when none."""
    n = hit.shape[-1]
    first: Ints = np.where(hit.any(axis=-1), hit.argmax(axis=-1), n).astype(np.int64)
    return first


def sequential_stops(x: npt.NDArray[np.float64], threshold: float, alpha: float
                     ) -> tuple[Ints, Ints]:
    """Per run, the tasks looked at when the sequential test said REGRESSION (or the run's
    length + 1 when it never did) and when it said OK; the earlier decides, REGRESSION on a tie
    (sequential.decide, row by row)."""
    lm, lp = sequential.bets(x, threshold)
    low, high = sequential.log_capitals(x, threshold, lm, lp)
    level = math.log(1 / alpha)
    return first_true(low >= level) + 1, first_true(high >= level) + 1


def sign_test_critical(max_n: int, alpha: float, sides: int = 1) -> Ints:
    """crit[m]: the least count b of m discordant pairs going the baseline's way that an exact
    binomial test (p = 1/2) rejects at alpha (one-sided; two-sided: twice the tail, as
    statsmodels' exact McNemar); m + 1 when none does."""
    from scipy.stats import binom

    crit = np.empty(max_n + 1, dtype=np.int64)
    for m in range(max_n + 1):
        b = np.arange(m + 1)
        tail = np.minimum(1.0, sides * binom.sf(b - 1, m, 0.5))  # P(B >= b)
        ok = np.flatnonzero(tail <= alpha)
        crit[m] = int(ok[0]) if ok.size else m + 1
    return crit


def fixed_peeking(x: npt.NDArray[np.float64], alpha: float) -> dict[str, Ints]:
    """Per run, the first task after which a fixed-sample test says the candidate is worse
    (length + 1 when never): `sign` the exact one-sided binomial (sign) test at alpha on the
    discordant tasks; `mcnemar` the gate's primary test (two-sided McNemar at alpha, exact
    below 25 discordant pairs, else chi-square with continuity correction), rejecting with
    more pairs going the baseline's way."""
    from scipy.stats import chi2

    b = np.cumsum(x > 0, axis=-1)
    c = np.cumsum(x < 0, axis=-1)
    m = b + c
    one = sign_test_critical(x.shape[-1], alpha, sides=1)
    two = sign_test_critical(x.shape[-1], alpha, sides=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.where(m > 0, (np.abs(b - c) - 1.0) ** 2 / m, 0.0)
    asym = (m >= EXACT_MCNEMAR_BELOW) & (b > c) & (stat > chi2.ppf(1 - alpha, 1))
    mcnemar = np.where(m < EXACT_MCNEMAR_BELOW, b >= two[m], asym)
    return {"sign": first_true(b >= one[m]) + 1, "mcnemar": first_true(mcnemar) + 1}


@dataclass(frozen=True)
class Scenario:
    p10: float
    p01: float

    @property
    def drop(self) -> float:
        return self.p10 - self.p01


def simulate(scenario: Scenario, threshold: float, alpha: float, tasks: int, runs: int,
             seed: int = 0) -> dict[str, Any]:
    """`runs` paired runs of `tasks` tasks under `scenario`, every test looked at after every
    task: how often each says REGRESSION (and the sequential test OK) by the end, and the
    sequential test's stopping sizes."""
    x = paired_drops(np.random.default_rng(seed), runs, tasks, scenario.p10, scenario.p01)
    reg, ok = sequential_stops(x, threshold, alpha)
    regression = (reg <= tasks) & (reg <= ok)
    okay = (ok <= tasks) & (ok < reg)
    stop = np.where(regression, reg, np.where(okay, ok, tasks))
    fixed = fixed_peeking(x, alpha)
    decided = regression | okay
    return {
        "p10": scenario.p10, "p01": scenario.p01, "drop": scenario.drop,
        "threshold": threshold, "alpha": alpha, "tasks": tasks, "runs": runs, "seed": seed,
        "sequential_regression": float(regression.mean()),
        "sequential_ok": float(okay.mean()),
        "sequential_decided": float(decided.mean()),
        "median_stop": float(np.median(stop[decided])) if decided.any() else None,
        "p90_stop": float(np.percentile(stop[decided], 90)) if decided.any() else None,
        "fixed_sign_peeking": float((fixed["sign"] <= tasks).mean()),
        "fixed_mcnemar_peeking": float((fixed["mcnemar"] <= tasks).mean()),
        "fixed_sign_at_end": float(_fixed_at_end(x, alpha)),
    }


def _fixed_at_end(x: npt.NDArray[np.float64], alpha: float) -> float:
    """How often the one-sided sign test, looked at once after the last task, rejects."""
    b, m = (x > 0).sum(axis=-1), (x != 0).sum(axis=-1)
    crit = sign_test_critical(x.shape[-1], alpha)
    return float((b >= crit[m]).mean())


def stopping_pairs(effect: float, psi: float, alpha: float, cap: int, runs: int = 2000,
                   seed: int = 0, fixed: int | None = None) -> dict[str, Any]:
    """Independent pairs the sequential test (threshold 0: any drop) looks at before it says
    REGRESSION against a true drop of `effect` with discordance `psi` (plan.py converts pairs to
    tasks with its design effect), each run stopped at `cap` pairs: the median and 90th
    percentile among the runs that stopped, and how many stopped by `cap` (and by `fixed`)."""
    psi = min(1.0, max(psi, effect))
    p10, p01 = (psi + effect) / 2, (psi - effect) / 2
    rng = np.random.default_rng(seed)
    stops = []
    block = max(1, min(500, 2_000_000 // max(cap, 1)))  # each block's arrays stay ~16 MB
    for start in range(0, runs, block):
        x = paired_drops(rng, min(block, runs - start), cap, p10, p01)
        reg, ok = sequential_stops(x, 0.0, alpha)
        stops.append(np.where((reg <= cap) & (reg <= ok), reg, cap + 1))
    stop = np.concatenate(stops)
    done = stop <= cap
    return {"runs": runs, "seed": seed, "cap": cap, "stopped": float(done.mean()),
            "stopped_by_fixed": None if fixed is None else float((stop <= fixed).mean()),
            "median": float(np.median(stop[done])) if done.any() else None,
            "p90": float(np.percentile(stop[done], 90)) if done.any() else None}
