"""Regression gate for CI: is the candidate run worse than the baseline run?

Two modes, on the paired sample of `paired.compare` (same pairing invariants and exclusions):
- max-drop: regression if the observed drop (pass rate A - B) exceeds `max_drop`;
- non-inferiority: regression if the upper bound of the one-sided (1 - alpha) paired bootstrap
  interval of A - B exceeds `margin` (the candidate is not shown to be within the margin).
When both are given, either failing is a regression. With neither, max-drop 0.05 applies.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest_agentbench.reporting.stats as stats
from pytest_agentbench.reporting.load import ReportError, Run
from pytest_agentbench.reporting.paired import Missing, PairedReport, compare

SCHEMA_VERSION = 1
DEFAULT_MAX_DROP = 0.05


@dataclass
class GateResult:
    regression: bool
    data: dict[str, Any]
    paired: PairedReport

    @property
    def exit_code(self) -> int:
        return 1 if self.regression else 0


def gate(
    baseline: Run,
    candidate: Run,
    max_drop: float | None = None,
    margin: float | None = None,
    alpha: float = 0.05,
    missing: Missing = "fail",
    allow_mismatch: Iterable[str] = (),
    seed: int = 0,
    resamples: int = 10_000,
    infra_as_failure: bool = False,
) -> GateResult:
    if max_drop is None and margin is None:
        max_drop = DEFAULT_MAX_DROP
    for name, value in (("max_drop", max_drop), ("margin", margin)):
        if value is not None and not 0 <= value <= 1:
            raise ReportError(f"{name} must be a proportion in [0, 1], got {value}")
    if not 0 < alpha < 1:
        raise ReportError(f"alpha must be in (0, 1), got {alpha}")
    report = compare(baseline, candidate, "bootstrap", missing, allow_mismatch, seed, resamples,
                     alpha, infra_as_failure)
    p = report.data
    if p["pairs"] == 0:
        ex = p["exclusions"]
        raise ReportError(
            f"nothing to gate on: no paired attempt left after exclusions "
            f"({ex['invalid_or_flaky_tasks']} invalid or flaky task(s), "
            f"{ex['quarantined_pairs']} quarantined pair(s), {ex['infra_pairs']} infra-error "
            f"pair(s); {p['pairing']['common_tasks']} task(s) in common)")
    drop = p["pass_rate_a"] - p["pass_rate_b"]
    checks: list[dict[str, Any]] = []
    if max_drop is not None:
        checks.append({"mode": "max_drop", "threshold": max_drop, "value": drop,
                       "regression": drop > max_drop + 1e-12})
    upper = None
    if margin is not None:
        upper = stats.one_sided_upper(-report.distribution, 1 - alpha)
        checks.append({"mode": "non_inferiority", "threshold": margin, "value": upper,
                       "regression": upper > margin})
    regression = any(c["regression"] for c in checks)
    data = {
        "schema": "agentbench.gate",
        "schema_version": SCHEMA_VERSION,
        "regression": regression,
        "exit_code": 1 if regression else 0,
        "baseline": p["run_a"], "candidate": p["run_b"],
        "max_drop": max_drop, "margin": margin, "alpha": alpha,
        "observed_drop": drop, "drop_upper_bound": upper,
        "checks": checks,
        "verdict": _verdict(regression, p, checks, alpha),
        "paired": p,
    }
    return GateResult(regression=regression, data=data, paired=report)


def _pts(x: float) -> str:
    return f"{x * 100:.1f} points"


def _verdict(regression: bool, p: dict[str, Any], checks: list[dict[str, Any]],
             alpha: float) -> str:
    a, b = p["run_a"], p["run_b"]
    ex = p["exclusions"]
    boot = p["bootstrap"]
    mc = p["mcnemar"]
    t = p["table"]
    parts = [
        f"{'REGRESSION' if regression else 'OK'}: candidate {b['variant']} ({b['run_id']}) "
        f"passed {p['pass_rate_b'] * 100:.1f}% of {p['pairs']} paired attempts over "
        f"{p['tasks']} tasks, against {p['pass_rate_a'] * 100:.1f}% for baseline "
        f"{a['variant']} ({a['run_id']})."
    ]
    for c in checks:
        verb = "exceeds" if c["regression"] else "is within"
        if c["mode"] == "max_drop":
            parts.append(f"The observed drop of {_pts(c['value'])} {verb} the allowed maximum "
                         f"drop of {_pts(c['threshold'])}.")
        else:
            parts.append(f"The one-sided {(1 - alpha) * 100:.0f}% upper bound of the drop, "
                         f"{_pts(c['value'])} (paired bootstrap over tasks, "
                         f"{boot['resamples']} resamples, seed {boot['seed']}), {verb} the "
                         f"non-inferiority margin of {_pts(c['threshold'])}.")
    parts.append(f"{t['a_only']} pair(s) passed only on the baseline and {t['b_only']} only on "
                 f"the candidate (McNemar, {mc['test']}: p = {mc['pvalue']:.4g}).")
    infra = (f"{ex['infra_pairs']} pair(s) with an infra error were kept and counted as "
             "failures" if ex["infra_counted_as_failure"]
             else f"{ex['infra_pairs']} infra-error pair(s) were excluded")
    parts.append(f"{ex['invalid_or_flaky_tasks']} invalid or flaky task(s) and "
                 f"{ex['quarantined_pairs']} quarantined pair(s) were excluded; {infra}.")
    return " ".join(parts)
