"""Regression gate for CI: is the candidate run worse than the baseline run?

On the paired sample of `paired.compare` (same pairing invariants and exclusions, and the same
primary test as `report paired`: McNemar, exact binomial below 25 discordant pairs), with D the
drop in pass rate A - B, U and L the one-sided (1 - alpha) upper and lower bounds of D from the
paired bootstrap over tasks. The bootstrap stands alone only when at least 10 tasks have a pair
going each way (stats.BOOTSTRAP_MIN_PER_SIDE); below that its bounds are widened to the exact
ones of stats.exact_section (Clopper-Pearson on each discordant proportion, Bonferroni, counts
scaled to tasks): when no pair favours the baseline every resample shows no drop and the
bootstrap's U degenerates to 0 whatever the sample size, which would rule out any drop (a false
green: 3 tasks, the candidate winning the only discordant one, read OK).
Each configured check has three answers:
- max-drop: REGRESSION if the observed drop D exceeds `max_drop`; OK if U <= max_drop (a drop
  that large is ruled out); else INCONCLUSIVE;
- non-inferiority (`margin`): REGRESSION if L > margin (the candidate is shown worse than the
  margin); OK if U <= margin (shown within it); else INCONCLUSIVE.
With neither, max-drop 0.05 applies. The gate's verdict: REGRESSION (exit 1) if any check says
so; OK (exit 0) if every check says OK; else INCONCLUSIVE (exit 3, or 0 with `inconclusive_ok`;
the report commands use 2 for bad input): the data cannot tell a regression of the configured
size from none. So a zero threshold is OK only when the candidate is shown at least as good.
The verdict also states the sample's minimum detectable effect (paired data["power"]: two-sided
McNemar at alpha, power 0.8, its discordance and design effect; power.py), the smallest drop
it would catch 80% of the time, and points to `agentbench plan` when the answer is inconclusive.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest_agentbench.reporting.stats as stats
from pytest_agentbench.reporting.gate_outcome import exit_code, outcome_of
from pytest_agentbench.reporting.load import ReportError, Run
from pytest_agentbench.reporting.paired import Method, Missing, PairedReport, compare

SCHEMA_VERSION = 1  # later additions are keys only: outcome, inconclusive, inconclusive_ok, mde
DEFAULT_MAX_DROP = 0.05
PRIMARY_METHOD: Method = "mcnemar"  # as `report paired` and `report compare` by default


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
        return exit_code(outcome_of(self.regression, self.inconclusive), self.inconclusive_ok)


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
    report = compare(baseline, candidate, PRIMARY_METHOD, missing, allow_mismatch, seed,
                     resamples, alpha, infra_as_failure)
    p = report.data
    if p["pairs"] == 0:
        ex = p["exclusions"]
        raise ReportError(
            f"nothing to gate on: no paired attempt left after exclusions "
            f"({ex['invalid_or_flaky_tasks']} invalid or flaky task(s), "
            f"{ex['quarantined_pairs']} quarantined pair(s), {ex['infra_pairs']} infra-error "
            f"pair(s); {p['pairing']['common_tasks']} task(s) in common)")
    drop = p["pass_rate_a"] - p["pass_rate_b"]
    upper, lower, bound_method = _drop_bounds(report, alpha)
    checks: list[dict[str, Any]] = []
    if max_drop is not None:
        checks.append({"mode": "max_drop", "threshold": max_drop, "value": drop,
                       "upper_bound": upper, "lower_bound": lower,
                       "regression": drop > max_drop + 1e-12,
                       "ruled_out": upper <= max_drop + 1e-12})
    if margin is not None:
        checks.append({"mode": "non_inferiority", "threshold": margin, "value": upper,
                       "upper_bound": upper, "lower_bound": lower,
                       "regression": lower > margin + 1e-12,
                       "ruled_out": upper <= margin + 1e-12})
    regression = any(c["regression"] for c in checks)
    inconclusive = not regression and not all(c["ruled_out"] for c in checks)
    mde = p["power"]["mde"]
    outcome = outcome_of(regression, inconclusive)
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
        "observed_drop": drop, "drop_upper_bound": upper, "drop_lower_bound": lower,
        "bound_method": bound_method,
        "primary_method": p["method"], "significant": p["significant"],
        "mde": mde,
        "checks": checks,
        "verdict": _verdict(outcome, p, checks, alpha),
        "paired": p,
    })
    return result


def _drop_bounds(report: PairedReport, alpha: float) -> tuple[float, float, str]:
    """One-sided (1 - alpha) upper and lower bounds of the drop A - B, and how they were made
    (module docstring)."""
    exact = report.data["exact"]
    upper = stats.one_sided_upper(-report.distribution, 1 - alpha)
    lower = -stats.one_sided_upper(report.distribution, 1 - alpha)
    if exact["bootstrap_alone"]:
        return upper, lower, "paired bootstrap over tasks"
    upper, lower = max(upper, exact["drop_upper"]), min(lower, exact["drop_lower"])
    return upper, lower, (f"exact ({exact['method']}), the bootstrap's when wider: fewer than "
                          f"{stats.BOOTSTRAP_MIN_PER_SIDE} tasks disagree each way")


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
        bound = (f"its one-sided {(1 - alpha) * 100:.0f}% upper bound "
                 f"{_pts(c['upper_bound'])}"
                 + (f" (paired bootstrap over tasks, {boot['resamples']} resamples, seed "
                    f"{boot['seed']})" if p["exact"]["bootstrap_alone"]
                    else f" (exact: {p['exact']['a_only_tasks']} task(s) favour the baseline "
                         f"and {p['exact']['b_only_tasks']} the candidate, too few for the "
                         "bootstrap)"))
        if c["mode"] == "max_drop":
            verdict = ("exceeds" if c["regression"] else "is within")
            parts.append(f"The observed drop of {_pts(c['value'])} {verdict} the allowed "
                         f"maximum drop of {_pts(c['threshold'])}; {bound} "
                         + ("rules out a larger one." if c["ruled_out"]
                            else "does not rule out a larger one."))
        else:
            parts.append(f"Against the non-inferiority margin of {_pts(c['threshold'])}: "
                         + (f"the one-sided lower bound of the drop, {_pts(c['lower_bound'])}, "
                            "exceeds it (shown worse)." if c["regression"]
                            else f"{bound} is within it (shown non-inferior)."
                            if c["ruled_out"] else f"{bound} exceeds it, but the lower bound "
                            f"{_pts(c['lower_bound'])} does not (neither shown)."))
    parts.append(_mde_sentence(outcome, p["power"], checks))
    parts.append(f"{t['a_only']} pair(s) passed only on the baseline and {t['b_only']} only on "
                 f"the candidate; the primary test, as in report paired, is McNemar "
                 f"({mc['test']}): p = {mc['pvalue']:.4g}, "
                 f"{'significant' if p['significant'] else 'not significant'} at alpha = "
                 f"{alpha}.")
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
        return (f"{head}; the gate is asked about {_pts(limit)}. This run neither shows a "
                "regression of that size nor rules it out: run more tasks or attempts "
                "(agentbench plan says how many).")
    return f"{head}."
