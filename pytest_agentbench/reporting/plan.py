"""`agentbench plan`: how many tasks x attempts a paired comparison needs, from a pilot.

The sample size is Connor's (1987) for the two-sided McNemar test (power.py):
n = [z(1-alpha/2) sqrt(psi) + z(power) sqrt(psi - delta^2)]^2 / delta^2 independent pairs, for a
difference delta in pass rate and a discordant proportion psi, then inflated by the design effect
1 + (K - 1) ICC for K attempts per task and spread over tasks: tasks = ceil(n * deff / K).

Where psi and the ICC come from:
- two pilot runs (A, B): paired as `paired.compare` pairs them (same invariants and exclusions);
  psi is the observed discordance (b + c) / pairs, raised to delta if smaller (an effect of delta
  makes at least that many pairs discordant); the ICC is that of the pair difference
  B - A (-1, 0, 1) within tasks (power.anova_icc), when some task has several pairs;
- one pilot run: B is assumed to be A shifted by the effect, each attempt of B independent of
  A's given the task. For a task with pass probability p_t in A and p_t + delta in B,
  P(discordant) = 2 p_t (1 - p_t) + delta (1 - 2 p_t) <= 2 p_t (1 - p_t) + |delta|; the plan
  uses the bound psi = 2 mean_t p_t (1 - p_t) + |delta| (conservative: more pairs). p_t(1 - p_t)
  is estimated without bias from a task's c passes in n >= 2 attempts as c (n - c) / (n (n - 1));
  when no task has two attempts it is bounded by pbar (1 - pbar) (Jensen), which is larger. The
  ICC is that of the pass outcome within tasks, a stand-in for that of the differences.
With no ICC estimate (one attempt per task everywhere) and K > 1, ICC = 1 is assumed: extra
attempts are then worth nothing, the conservative answer. An undefined ICC (nothing varies in the
pilot, e.g. every attempt passed: the ANOVA ratio is 0/0, not 0) is unknown too, taken as 1 and
said so (read as 0.000 it asked for a third of the tasks). `icc=` overrides every
estimate.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

import pytest_agentbench.reporting.power as power
from pytest_agentbench.reporting.load import ReportError, Run

SCHEMA_VERSION = 1
_UNDEFINED = ("undefined: no {what} varies in the pilot (the ratio is 0/0); taken as 1, as an "
              "unknown ICC, so extra attempts count for nothing")
MIN_EFFECT = 0.001  # a tenth of a point: already millions of tasks; below it n / delta^2 overflows


def _check(effect: float, alpha: float, power_: float, attempts: int,
           icc: float | None) -> None:
    if not MIN_EFFECT <= effect <= 1:  # nan and the infinities fail this too
        raise ReportError(f"--effect must be a difference in pass rate in [{MIN_EFFECT:g}, 1], "
                          f"e.g. 0.05 for 5 points; got {effect:g}")
    if not 0 < alpha < 1:
        raise ReportError(f"--alpha must be in (0, 1), got {alpha}")
    if not 0 < power_ < 1:
        raise ReportError(f"--power must be in (0, 1), got {power_}")
    if attempts < 1:
        raise ReportError(f"--attempts must be at least 1, got {attempts}")
    if icc is not None and not 0 <= icc <= 1:
        raise ReportError(f"--icc must be in [0, 1], got {icc}")


def _from_two(a: Run, b: Run, effect: float, missing: Any, allow_mismatch: Any,
              infra_as_failure: bool) -> dict[str, Any]:
    from pytest_agentbench.reporting.paired import pair_runs

    pairs = pair_runs(a, b, missing, allow_mismatch, infra_as_failure).pairs
    n = len(pairs)
    if n == 0:
        raise ReportError("the pilot runs have no paired attempt left after exclusions")
    pa, pb = pairs["a_passed"].to_numpy(bool), pairs["b_passed"].to_numpy(bool)
    p10, p01 = float((pa & ~pb).mean()), float((~pa & pb).mean())
    codes = pairs["task_id"].factorize()[0]
    tasks = int(codes.max()) + 1
    icc = power.anova_icc(pb.astype(float) - pa.astype(float), codes) if tasks < n else None
    return {"mode": "two pilots", "pairs": n, "tasks": tasks, "p10": p10, "p01": p01,
            "observed_discordance": p10 + p01, "observed_difference": p01 - p10,
            "psi": max(p10 + p01, effect), "icc": icc,
            "icc_source": ("pair differences B - A within tasks" if icc is not None
                           else _UNDEFINED.format(what="pair difference B - A")
                           if tasks < n else None),
            "assumption": (f"the discordance of the pilot pair ({(p10 + p01) * 100:.1f}% of "
                           "pairs disagree) holds in the full run"
                           + (f", raised to the effect ({effect * 100:.1f}%), the least an "
                              "effect that size implies" if p10 + p01 < effect else ""))}


def _from_one(a: Run, effect: float, infra_as_failure: bool) -> dict[str, Any]:
    df = a.attempts
    category = df["category"]
    keep = (category == "scored").to_numpy(bool)
    if infra_as_failure:
        keep |= (category == "infra").to_numpy(bool)
    passed = df["passed"].to_numpy(bool)[keep] & (category == "scored").to_numpy(bool)[keep]
    if not len(passed):
        raise ReportError("the pilot run has no scored attempt")
    codes = df["task_id"][keep].factorize()[0]
    n = np.bincount(codes).astype(float)
    c = np.bincount(codes, weights=passed.astype(float))
    several = n >= 2
    if several.any():
        ns, cs = n[several], c[several]
        var = float((cs * (ns - cs) / (ns * (ns - 1))).mean())
        var_source = (f"unbiased c(n-c)/(n(n-1)) over the {int(several.sum())} task(s) with "
                      "several attempts")
    else:
        pbar = float(passed.mean())
        var = pbar * (1 - pbar)
        var_source = ("pbar (1 - pbar), an upper bound: no task has two attempts, so the "
                      "variability within a task cannot be estimated")
    icc = power.anova_icc(passed.astype(float), codes) if several.any() else None
    return {"mode": "one pilot", "pairs": None, "tasks": len(n), "attempts": int(n.sum()),
            "pass_rate": float(passed.mean()), "within_task_variance": var,
            "within_task_variance_source": var_source,
            "psi": min(1.0, 2 * var + effect), "icc": icc,
            "icc_source": ("pass outcome within tasks" if icc is not None
                           else _UNDEFINED.format(what="pass outcome")
                           if several.any() else None),
            "assumption": ("B is A shifted by the effect, its attempts independent of A's given "
                           "the task; discordance = 2 mean p_t(1 - p_t) + effect, an upper bound "
                           "of the exact 2 mean p_t(1 - p_t) + effect (1 - 2 p_t)")}


def plan(pilot_a: Run, pilot_b: Run | None = None, effect: float = 0.05, alpha: float = 0.05,
         power_: float = 0.8, attempts: int = 1, icc: float | None = None,
         missing: Any = "fail", allow_mismatch: Any = (),
         infra_as_failure: bool = False) -> dict[str, Any]:
    """The plan's data (see the module docstring and SCHEMA.md)."""
    _check(effect, alpha, power_, attempts, icc)
    inputs = (_from_one(pilot_a, effect, infra_as_failure) if pilot_b is None else
              _from_two(pilot_a, pilot_b, effect, missing, allow_mismatch, infra_as_failure))
    if icc is not None:
        inputs["icc"], inputs["icc_source"] = icc, "given (--icc)"
    elif inputs["icc"] is None and attempts > 1 and inputs["icc_source"] is None:
        inputs["icc_source"] = ("unknown (the pilot has one attempt per task): taken as 1, so "
                                "extra attempts count for nothing")
    try:
        size = power.tasks_needed(effect, inputs["psi"], alpha, power_, attempts, inputs["icc"])
    except ValueError as exc:
        raise ReportError(str(exc)) from exc
    except ArithmeticError as exc:  # the inputs together are past what a float can hold
        raise ReportError(f"no sample size for these inputs ({exc}): delta = {effect:g}, "
                          f"psi = {inputs['psi']:g}, alpha = {alpha:g}, power = {power_:g}") \
            from exc
    runs = [pilot_a] + ([pilot_b] if pilot_b is not None else [])
    data: dict[str, Any] = {
        "schema": "agentbench.plan", "schema_version": SCHEMA_VERSION,
        "pilots": [{"run_id": r.run_id, "variant": r.variant, "path": str(r.path)} for r in runs],
        "effect": effect, "alpha": alpha, "power": power_, "sides": 2,
        "test": "McNemar (paired, two-sided, no continuity correction)",
        "formula": power.FORMULA, "design_effect_formula": power.DESIGN_EFFECT,
        "inputs": inputs,
        "independent_pairs": size.independent_pairs, "design_effect": size.design_effect,
        "tasks": size.tasks, "attempts_per_task": size.attempts,
        "attempts_per_run": size.pairs,
    }
    data["sequential"] = _sequential(data, alpha)
    data["sentence"] = _sentence(data)
    return data


SEQUENTIAL_MAX_PAIRS = 2_500  # beyond it the simulation takes seconds: not simulated


def _sequential(d: dict[str, Any], alpha: float) -> dict[str, Any]:
    """The expected stopping size of `--agentbench-sequential` against a true drop of the
    effect, beside the fixed size: simulated (sequential_sim.stopping_pairs, independent pairs,
    threshold 0, each run capped at 4 x the fixed size) and spread over tasks with the same
    design effect as the fixed size."""
    from pytest_agentbench.reporting.sequential_sim import stopping_pairs

    n, k, deff = d["independent_pairs"], d["attempts_per_task"], d["design_effect"]
    if n > SEQUENTIAL_MAX_PAIRS:
        return {"simulated": False, "reason": f"more than {SEQUENTIAL_MAX_PAIRS} independent "
                "pairs: not simulated"}
    sim = stopping_pairs(d["effect"], d["inputs"]["psi"], alpha, 4 * n, fixed=n)

    def tasks(pairs: float | None) -> int | None:
        return None if pairs is None else math.ceil(pairs * deff / k)

    return {"simulated": True, "runs": sim["runs"], "seed": sim["seed"], "threshold": 0.0,
            "sides": 1, "median_tasks": tasks(sim["median"]), "p90_tasks": tasks(sim["p90"]),
            "stopped_by_fixed": sim["stopped_by_fixed"], "cap_tasks": tasks(4 * n),
            "stopped_by_cap": sim["stopped"]}


def _sentence(d: dict[str, Any]) -> str:
    inp = d["inputs"]
    k = d["attempts_per_task"]
    more = ""
    if inp["tasks"] < d["tasks"]:
        more = f" The pilot had {inp['tasks']} task(s): you need more tasks, not only more runs."
    return (f"To detect a difference of {d['effect'] * 100:.1f} points in pass rate between two "
            f"variants with {d['power'] * 100:.0f}% probability (two-sided, alpha = "
            f"{d['alpha']}), run {d['tasks']} task(s) x {k} attempt{'s' if k > 1 else ''} in "
            f"each variant ({d['attempts_per_run']} attempts per variant), assuming "
            f"{inp['psi'] * 100:.1f}% of paired attempts disagree. A smaller run can still show "
            f"a larger difference, but it will often miss one of this size.{more}")


def render_plan(data: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n"
    if fmt != "md":
        raise ValueError(f"unknown format {fmt!r}")
    inp = data["inputs"]
    pilots = ", ".join(f"`{p['run_id']}` ({p['variant']})" for p in data["pilots"])
    lines = [f"# Plan: {data['tasks']} tasks x {data['attempts_per_task']} attempt(s)", "",
             data["sentence"], "",
             f"- Pilot(s): {pilots}; {inp['mode']}: {inp['assumption']}.",
             f"- Formula: {data['formula']}; {data['design_effect_formula']}.",
             f"- Inputs: delta = {data['effect']}, alpha = {data['alpha']} (two-sided), power "
             f"= {data['power']}, psi = {inp['psi']:.4f}"]
    if inp["mode"] == "two pilots":
        lines[-1] += (f" (pilot: {inp['pairs']} pairs over {inp['tasks']} tasks, p10 = "
                      f"{inp['p10']:.4f}, p01 = {inp['p01']:.4f}, observed difference B - A "
                      f"{inp['observed_difference'] * 100:+.1f} points)")
    else:
        lines[-1] += (f" (pilot: {inp['attempts']} scored attempts over {inp['tasks']} tasks, "
                      f"pass rate {inp['pass_rate'] * 100:.1f}%, mean p_t(1 - p_t) = "
                      f"{inp['within_task_variance']:.4f} from "
                      f"{inp['within_task_variance_source']})")
    icc = inp["icc"]
    lines[-1] += (f", ICC = {'n/a' if icc is None else format(icc, '.3f')}"
                  + (f" ({inp['icc_source']})" if inp["icc_source"] else "") + ".")
    lines.append(f"- Result: {data['independent_pairs']} independent pairs x design effect "
                 f"{data['design_effect']:.3f} / {data['attempts_per_task']} attempt(s) per "
                 f"task = {data['tasks']} tasks.")
    seq = data.get("sequential") or {}
    if seq.get("simulated") and seq["median_tasks"] is not None:
        lines.append(
            f"- Sequential (--agentbench-sequential, stops at the first REGRESSION, one-sided "
            f"alpha = {data['alpha']} at any stopping time), against a true drop of "
            f"{data['effect'] * 100:.1f} points: median stop {seq['median_tasks']} tasks (90th "
            f"percentile {seq['p90_tasks']}), REGRESSION within the fixed {data['tasks']} "
            f"tasks in {seq['stopped_by_fixed'] * 100:.0f}% and within {seq['cap_tasks']} in "
            f"{seq['stopped_by_cap'] * 100:.0f}% of {seq['runs']} simulated runs.")
    elif seq:
        lines.append(f"- Sequential: {seq.get('reason', 'no run of the simulation stopped')}.")
    return "\n".join(lines) + "\n"

