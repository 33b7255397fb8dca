"""Regression gate for CI: is the candidate run worse than the baseline run?

Two modes, on the paired sample of `paired.compare` (same pairing invariants and exclusions):
- max-drop: regression if the observed drop (pass rate A - B) exceeds `max_drop`;
- non-inferiority: regression if the upper bound of the one-sided (1 - alpha) paired bootstrap
  interval of A - B exceeds `margin` (the candidate is not shown to be within the margin).
When both are given, either failing is a regression. With neither, max-drop 0.05 applies.

Three verdicts, each with its exit code (the report commands use 2 for bad input, so 3 is free):
- REGRESSION (exit 1): a check above fails;
- INCONCLUSIVE (exit 3; 0 with `inconclusive_ok`): no check fails, but the data cannot tell a
  regression of the configured size from none. Exact rule: with MDE the minimum detectable
  effect of the paired sample (paired data["power"]["mde"]: two-sided McNemar at the gate's
  alpha, power 0.8, the pairs' discordance and their design effect by task; power.py), the gate
  is inconclusive when MDE is None (too few pairs for any effect) or MDE > threshold for any
  configured check (max_drop, margin) — a drop of that size would be missed more than 20% of
  the time;
- OK (exit 0): no check fails and every configured threshold is at least the MDE.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest_agentbench.reporting.stats as stats
from pytest_agentbench.reporting.load import ReportError, Run
from pytest_agentbench.reporting.paired import Missing, PairedReport, compare

SCHEMA_VERSION = 1  # issue 14 added keys only: outcome, inconclusive, inconclusive_ok, mde
DEFAULT_MAX_DROP = 0.05
EXIT_OK, EXIT_REGRESSION, EXIT_INCONCLUSIVE = 0, 1, 3


@dataclass
class GateResult:
    regression: bool
    data: dict[str, Any]
    paired: PairedReport
    inconclusive: bool = False
    inconclusive_ok: bool = False

    @property
    def outcome(self) -> str:
        """One of regression, inconclusive, ok."""
        return str(self.data["outcome"])

    @property
    def exit_code(self) -> int:
        if self.regression:
            return EXIT_REGRESSION
        if self.inconclusive and not self.inconclusive_ok:
            return EXIT_INCONCLUSIVE
        return EXIT_OK


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
    inconclusive_ok: bool = False,
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
    mde = p["power"]["mde"]
    for c in checks:
        c["detectable"] = mde is not None and mde <= c["threshold"] + 1e-12
    inconclusive = not regression and not all(c["detectable"] for c in checks)
    outcome = "regression" if regression else "inconclusive" if inconclusive else "ok"
    result = GateResult(regression=regression, data={}, paired=report,
                        inconclusive=inconclusive, inconclusive_ok=inconclusive_ok)
    result.data.update({
        "schema": "agentbench.gate",
        "schema_version": SCHEMA_VERSION,
        "outcome": outcome,
        "regression": regression,
        "inconclusive": inconclusive,
        "inconclusive_ok": inconclusive_ok,
        "exit_code": result.exit_code,
        "baseline": p["run_a"], "candidate": p["run_b"],
        "max_drop": max_drop, "margin": margin, "alpha": alpha,
        "observed_drop": drop, "drop_upper_bound": upper,
        "mde": mde,
        "checks": checks,
        "verdict": _verdict(outcome, p, checks, alpha),
        "paired": p,
    })
    return result


def _pts(x: float) -> str:
    return f"{x * 100:.1f} points"


def _verdict(outcome: str, p: dict[str, Any], checks: list[dict[str, Any]],
             alpha: float) -> str:
    a, b = p["run_a"], p["run_b"]
    ex = p["exclusions"]
    boot = p["bootstrap"]
    mc = p["mcnemar"]
    t = p["table"]
    parts = [
        f"{outcome.upper()}: candidate {b['variant']} ({b['run_id']}) "
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
    parts.append(_mde_sentence(outcome, p["power"], checks))
    parts.append(f"{t['a_only']} pair(s) passed only on the baseline and {t['b_only']} only on "
                 f"the candidate (McNemar, {mc['test']}: p = {mc['pvalue']:.4g}).")
    infra = (f"{ex['infra_pairs']} pair(s) with an infra error were kept and counted as "
             "failures" if ex["infra_counted_as_failure"]
             else f"{ex['infra_pairs']} infra-error pair(s) were excluded")
    parts.append(f"{ex['invalid_or_flaky_tasks']} invalid or flaky task(s) and "
                 f"{ex['quarantined_pairs']} quarantined pair(s) were excluded; {infra}.")
    return " ".join(parts)


def _mde_sentence(outcome: str, pw: dict[str, Any], checks: list[dict[str, Any]]) -> str:
    """The minimum detectable effect against the thresholds, and what to do if it is too big."""
    limit = min(c["threshold"] for c in checks)
    if pw["mde"] is None:
        head = (f"These {pw['pairs']} pairs are too few to detect any drop with "
                f"{pw['power'] * 100:.0f}% power")
    else:
        head = (f"The smallest drop these {pw['pairs']} pairs detect with "
                f"{pw['power'] * 100:.0f}% power (two-sided McNemar, alpha = {pw['alpha']}, "
                f"discordance {pw['discordance'] * 100:.1f}%"
                + (f", design effect {pw['design_effect']:.2f}" if pw["design_effect"] > 1
                   else "") + f") is {_pts(pw['mde'])}")
    if outcome == "inconclusive":
        return (f"{head}, more than the {_pts(limit)} the gate is asked to catch: a regression "
                "of that size could pass unnoticed, so this run neither shows one nor rules it "
                "out. Run more tasks or attempts (`agentbench plan` says how many).")
    return f"{head}."
