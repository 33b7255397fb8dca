"""An anytime-valid sequential comparison of a candidate run against a baseline run.

The gate's tests (gate.py) are fixed-sample: looked at after every task and stopped at the first
REGRESSION, they raise false alarms far more often than alpha (tests/unit/test_sequential_sim.py
measures it). This module's test may be looked at after every task, and stopped at any time.

Observations. Tasks are taken in an order drawn at random with a recorded seed (`task_order`:
each task's place is a hash of the seed and its id, so the order of any subset is that of the
whole, and a resumed run or an offline replay puts the tasks in the same order). Task t gives
x_t in [-1, 1], the mean over its paired attempts of (baseline passed) - (candidate passed),
after `paired.pair_runs`'s invariants and exclusions; a task with no pair left gives nothing.
In a random order the x_t are i.i.d. draws from the suite (the bootstrap over tasks of the gate
rests on the same model); their mean mu is the drop the gate estimates (equal to the gate's
pooled drop when every task has the same number of pairs).

Test. Testing by betting (Shafer 2021, "Testing by betting", JRSS A 184:407; Waudby-Smith and
Ramdas 2024, "Estimating means of bounded random variables by betting", JRSS B 86:1). For a
threshold m, two capital processes start at 1:
    K-_t(m) = prod_{i<=t} (1 + lam-_i (x_i - m))    (bets that the drop exceeds m)
    K+_t(m) = prod_{i<=t} (1 + lam+_i (m - x_i))    (bets that it is below m)
with bets 0 <= lam_i <= CAP = 0.45 chosen from x_1..x_{i-1} only (predictable): the aGRAPA rule
of Waudby-Smith and Ramdas (section 5.3), lam = (mu_hat - m) / (sigma_hat^2 + (mu_hat - m)^2),
clipped, computed at the gate's threshold, with their running mean and variance regularised by
PRIOR_WEIGHT = 10 pseudo-tasks of no drop and variance 1 (theirs use 1): early bets stay small,
so a few lucky first tasks cannot stop a run. Measured by simulation (test_sequential_sim.py,
50,000 equal runs of 500 tasks, threshold 5 points): false REGRESSION 0.17% with weight 1, 0.02%
with 10; the price, a median stop at 36 tasks instead of 29 for a 40-point drop.
Every factor is >= 1 - 2 CAP > 0 for x, m in [-1, 1]. If mu <= m, K-(m) is a nonnegative
supermartingale (E[1 + lam (x - mu')] <= 1 given the past), so by Ville's inequality
P(K-_t(m) >= 1/alpha for some t) <= alpha: peeking after every task and stopping at any time
is covered (Howard, Ramdas, McAuliffe and Sekhon 2021, "Time-uniform, nonparametric,
nonasymptotic confidence sequences", Ann. Statist. 49:1055). The same for K+ if mu >= m.
The bets do not depend on m, so K-_t(m) decreases and K+_t(m) increases in m: the m that are
not rejected form an interval, the anytime-valid confidence sequence [L_t, U_t] of the drop
(one-sided 1 - alpha bounds each, found by bisection).

Decision at the threshold delta (the gate's max drop or margin; the smaller when both are
given, the gate's rule "regression if any check says so, OK if all do" then reduces to it):
REGRESSION as soon as K-_t(delta) >= 1/alpha (the drop is shown to exceed delta: L_t > delta);
OK as soon as K+_t(delta) >= 1/alpha (shown within it: U_t <= delta); INCONCLUSIVE if neither
happens before the tasks run out. So P(REGRESSION | mu <= delta) <= alpha and
P(OK | mu >= delta) <= alpha at any stopping time. Unlike the fixed gate's max-drop check, a
regression is never declared on the observed drop alone: with stopping at the first sign of one
that rule would stop almost every run after its first failing task.
Exit statuses are the gate's: 0 OK, 1 REGRESSION, 3 INCONCLUSIVE (0 with inconclusive_ok).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_agentbench.reporting.gate_outcome import exit_code
from pytest_agentbench.reporting.names import ReportError

SCHEMA_VERSION = 1
CAP = 0.45  # largest fraction of the capital bet on one task: every factor stays >= 0.1
PRIOR_WEIGHT = 10  # the bets' running mean and variance start as 10 tasks of no drop
METHOD = ("betting e-process, aGRAPA bets (Waudby-Smith and Ramdas 2024), Ville's inequality; "
          "tasks in a random order")
Floats = npt.NDArray[np.float64]


def task_order(seed: int, task_ids: Iterable[str]) -> list[str]:
    """`task_ids` in the random order of `seed`: sorted by sha256(seed:task_id), so any subset
    keeps the relative order it has in the whole suite."""
    return sorted(set(task_ids), key=lambda t: (order_key(seed, t), t))


def order_key(seed: int, task_id: str) -> str:
    return hashlib.sha256(f"{seed}:{task_id}".encode()).hexdigest()


def bets(x: Floats, ref: float) -> tuple[Floats, Floats]:
    """The predictable aGRAPA bets (lam-, lam+) for the observations `x` (last axis: tasks in
    order; leading axes: independent sequences), against the reference drop `ref`."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    steps = np.arange(1, n + 1, dtype=np.float64)
    w = PRIOR_WEIGHT  # pseudo-tasks of no drop and the largest variance, 1, on [-1, 1]
    mean = np.cumsum(x, axis=-1) / (steps + w)
    var = (w + np.cumsum((x - mean) ** 2, axis=-1)) / (steps + w)
    shape = (*x.shape[:-1], 1)
    mean_prev = np.concatenate([np.zeros(shape), mean[..., :-1]], axis=-1)
    var_prev = np.concatenate([np.ones(shape), var[..., :-1]], axis=-1)
    gap = mean_prev - ref
    raw = gap / (var_prev + gap**2)
    return np.clip(raw, 0.0, CAP), np.clip(-raw, 0.0, CAP)


def log_capitals(x: Floats, m: float, lam_minus: Floats, lam_plus: Floats
                 ) -> tuple[Floats, Floats]:
    """log K-_t(m) and log K+_t(m) after each task (cumulative along the last axis)."""
    x = np.asarray(x, dtype=np.float64)
    return (np.cumsum(np.log1p(lam_minus * (x - m)), axis=-1),
            np.cumsum(np.log1p(lam_plus * (m - x)), axis=-1))


@dataclass(frozen=True)
class SequentialDecision:
    outcome: str  # regression, ok or inconclusive
    tasks: int  # tasks looked at when it was reached (all of them when inconclusive)
    e_regression: float  # K-(delta) then
    e_ok: float  # K+(delta) then
    lower: float  # anytime-valid one-sided (1 - alpha) bounds of the drop then
    upper: float


def decide(x: Sequence[float] | Floats, threshold: float, alpha: float) -> SequentialDecision:
    """The sequential test over `x` in order: stopped at the first task where it decides."""
    _check(threshold, alpha)
    xs = np.asarray(x, dtype=np.float64)
    if xs.size == 0:
        return SequentialDecision("inconclusive", 0, 1.0, 1.0, -1.0, 1.0)
    lm, lp = bets(xs, threshold)
    low, high = log_capitals(xs, threshold, lm, lp)
    level = math.log(1 / alpha)
    reg, ok = np.flatnonzero(low >= level), np.flatnonzero(high >= level)
    first_reg = int(reg[0]) if reg.size else xs.size
    first_ok = int(ok[0]) if ok.size else xs.size
    if first_reg < xs.size and first_reg <= first_ok:  # both at once: the gate's side, REGRESSION
        outcome, stop = "regression", first_reg
    elif first_ok < xs.size:
        outcome, stop = "ok", first_ok
    else:
        outcome, stop = "inconclusive", xs.size - 1
    seen = slice(0, stop + 1)
    lower, upper = bounds(xs[seen], lm[seen], lp[seen], alpha)
    return SequentialDecision(outcome, stop + 1, float(np.exp(low[stop])),
                              float(np.exp(high[stop])), lower, upper)


def bounds(x: Floats, lam_minus: Floats, lam_plus: Floats, alpha: float) -> tuple[float, float]:
    """[L, U]: the drops m in [-1, 1] neither capital rejects at 1/alpha after these tasks."""
    level = math.log(1 / alpha)

    def log_k(m: float) -> tuple[float, float]:
        low, high = log_capitals(x, m, lam_minus, lam_plus)
        return float(low[-1]), float(high[-1])

    lo, hi = -1.0, 1.0  # L: the largest m with log K-(m) >= level (K- decreases in m)
    if log_k(-1.0)[0] < level:
        lower = -1.0
    else:
        for _ in range(50):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if log_k(mid)[0] >= level else (lo, mid)
        lower = lo
    lo, hi = -1.0, 1.0  # U: the smallest m with log K+(m) >= level (K+ increases in m)
    if log_k(1.0)[1] < level:
        upper = 1.0
    else:
        for _ in range(50):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if log_k(mid)[1] >= level else (mid, hi)
        upper = hi
    return lower, upper


def threshold_of(max_drop: float | None, margin: float | None) -> float:
    """The one threshold the sequential test decides at (module docstring): the gate's default
    max drop when neither is given."""
    from pytest_agentbench.reporting.gate import DEFAULT_MAX_DROP

    given = [v for v in (max_drop, margin) if v is not None]
    return min(given) if given else DEFAULT_MAX_DROP


def _check(threshold: float, alpha: float) -> None:
    if not 0 <= threshold <= 1:
        raise ReportError(f"max drop / margin must be a proportion in [0, 1], got {threshold}")
    if not 0 < alpha < 1:
        raise ReportError(f"alpha must be in (0, 1), got {alpha}")


def as_record(decision: SequentialDecision, threshold: float, alpha: float, seed: int,
              order: list[str], drops: list[float], **extra: Any) -> dict[str, Any]:
    """The `sequential` section of run.json and of `gate --sequential --format json`."""
    return {
        "schema": "agentbench.sequential", "schema_version": SCHEMA_VERSION,
        "method": METHOD, "outcome": decision.outcome, "threshold": threshold,
        "alpha": alpha, "seed": seed, "tasks_used": decision.tasks,
        "tasks_available": len(order), "e_regression": decision.e_regression,
        "e_ok": decision.e_ok, "drop_lower": decision.lower, "drop_upper": decision.upper,
        "observed_drop": (float(np.mean(drops[:decision.tasks])) if decision.tasks else None),
        "order": order[:decision.tasks], "task_drops": drops[:decision.tasks],
        "exit_code": exit_code(decision.outcome), "reason": reason(decision, threshold, alpha),
        **extra,
    }


def reason(d: SequentialDecision, threshold: float, alpha: float) -> str:
    """Why the test stopped (or did not), in one sentence."""
    pts = f"{threshold * 100:.1f} points"
    bound = (f"anytime-valid {(1 - alpha) * 100:.0f}% bounds of the drop after {d.tasks} "
             f"task(s): [{d.lower * 100:.1f}, {d.upper * 100:.1f}] points")
    if d.outcome == "regression":
        return (f"REGRESSION after {d.tasks} task(s): the evidence that the drop exceeds {pts} "
                f"reached e = {d.e_regression:.1f} >= 1/alpha = {1 / alpha:g} ({bound})")
    if d.outcome == "ok":
        return (f"OK after {d.tasks} task(s): the evidence that the drop is within {pts} "
                f"reached e = {d.e_ok:.1f} >= 1/alpha = {1 / alpha:g} ({bound})")
    return (f"INCONCLUSIVE after all {d.tasks} task(s): neither a drop above {pts} "
            f"(e = {d.e_regression:.2f}) nor one within it (e = {d.e_ok:.2f}) reached "
            f"1/alpha = {1 / alpha:g} ({bound})")


@dataclass
class SequentialResult:
    """`gate --sequential`'s answer: `data` is the JSON document, the exit status the gate's."""

    data: dict[str, Any]
    inconclusive_ok: bool = False

    @property
    def outcome(self) -> str:
        return str(self.data["outcome"])

    @property
    def exit_code(self) -> int:
        return exit_code(self.outcome, self.inconclusive_ok)


def drops_in_order(baseline: Any, candidate: Any, seed: int, allow_mismatch: Iterable[str] = (),
                   infra_as_failure: bool = False, tasks: Iterable[str] | None = None
                   ) -> tuple[list[str], list[float], dict[str, Any]]:
    """The candidate's tasks (only `tasks` when given) in the order of `seed` and each one's
    drop x_t, paired with the baseline as `report paired` pairs them (its invariants and
    exclusions; tasks of one run only are skipped: a stopped run has not run the rest). Tasks
    with no pair left are left out; `info` counts them."""
    from pytest_agentbench.reporting.paired import pair_runs

    b_attempts = candidate.attempts
    if tasks is not None:
        wanted = set(tasks)
        b_attempts = b_attempts[b_attempts["task_id"].isin(wanted)]
        candidate = type(candidate)(candidate.path, candidate.meta, b_attempts, candidate.warnings)
    if b_attempts.empty:
        return [], [], {"candidate_tasks": 0, "paired_tasks": 0, "unpaired_tasks": 0}
    pairing = pair_runs(baseline, candidate, "skip", allow_mismatch, infra_as_failure)
    pairs = pairing.pairs
    diff = pairs["a_passed"].to_numpy(bool).astype(float) - pairs["b_passed"].to_numpy(bool)
    codes, names = pairs["task_id"].factorize()
    sums = np.bincount(codes, weights=diff, minlength=len(names))
    counts = np.bincount(codes, minlength=len(names))
    drop = {str(t): float(s / c) for t, s, c in zip(names, sums, counts, strict=True)}
    order = [t for t in task_order(seed, drop)]
    candidate_tasks = int(b_attempts["task_id"].nunique())
    info = {"candidate_tasks": candidate_tasks, "paired_tasks": len(order),
            "unpaired_tasks": len(pairing.info["only_in_b"]),
            "excluded_tasks": candidate_tasks - len(order) - len(pairing.info["only_in_b"]),
            "exclusions": pairing.exclusions}
    return order, [drop[t] for t in order], info


def sequential_gate(baseline: Any, candidate: Any, max_drop: float | None = None,
                    margin: float | None = None, alpha: float = 0.05, seed: int | None = None,
                    allow_mismatch: Iterable[str] = (), infra_as_failure: bool = False,
                    inconclusive_ok: bool = False) -> SequentialResult:
    """The sequential test replayed over two finished runs: the tasks in the candidate's
    recorded order (run.json `sequential.seed`; else `seed`, else 0), stopped where it decides."""
    for name, value in (("max_drop", max_drop), ("margin", margin)):
        if value is not None and not 0 <= value <= 1:
            raise ReportError(f"{name} must be a proportion in [0, 1], got {value}")
    threshold = threshold_of(max_drop, margin)
    recorded = (candidate.meta.get("sequential") or {}).get("seed")
    if isinstance(recorded, int) and not isinstance(recorded, bool):
        used, source = recorded, "the candidate's recorded order (run.json sequential.seed)"
    else:
        used = seed if seed is not None else 0
        source = (f"a random order of seed {used}: the candidate recorded none (it was not "
                  "run with --agentbench-sequential)")
    order, drops, info = drops_in_order(baseline, candidate, used, allow_mismatch,
                                        infra_as_failure)
    if not order:
        raise ReportError("nothing to test: no task of the candidate has a paired attempt left "
                          "after exclusions")
    decision = decide(drops, threshold, alpha)
    data = as_record(decision, threshold, alpha, used, order, drops, order_source=source,
                     baseline=baseline.run_id, candidate=candidate.run_id, pairing=info,
                     max_drop=max_drop, margin=margin, inconclusive_ok=inconclusive_ok)
    data["exit_code"] = exit_code(decision.outcome, inconclusive_ok)
    return SequentialResult(data, inconclusive_ok)


def render(data: dict[str, Any], fmt: str = "md") -> str:
    """`gate --sequential` as markdown or JSON (also the summary's section, `md` with level)."""
    import json

    if fmt == "json":
        return json.dumps(data, indent=2, allow_nan=False) + "\n"
    if fmt != "md":
        raise ValueError(f"unknown format {fmt!r} (gate --sequential writes md or json)")
    return "\n".join([f"# Sequential regression gate: {str(data['outcome']).upper()}", "",
                      *markdown_lines(data)]) + "\n"


def markdown_lines(data: dict[str, Any]) -> list[str]:
    """The body shared by `gate --sequential` and the run summary's section."""
    used, avail = data["tasks_used"], data["tasks_available"]
    lines = [str(data["reason"]) + ".", "",
             f"- Tasks looked at: {used} of {avail}, in a random order (seed {data['seed']}"
             + (f"; {data['order_source']}" if data.get("order_source") else "") + ").",
             f"- Threshold: {data['threshold'] * 100:.1f} points of drop (baseline minus "
             f"candidate pass rate); alpha = {data['alpha']} for each side, at any stopping "
             "time.",
             f"- Method: {data['method']}."]
    if data.get("observed_drop") is not None:
        lines.append(f"- Observed drop over those tasks: {data['observed_drop'] * 100:.1f} "
                     "points.")
    if data.get("stopped_run"):
        lines.append(f"- The run was stopped after {used} task(s) in order; "
                     f"{data.get('tasks_finished', used)} had finished.")
    pairing = data.get("pairing") or {}
    if pairing.get("unpaired_tasks"):
        lines.append(f"- {pairing['unpaired_tasks']} task(s) of the candidate have no attempt "
                     "in the baseline: skipped.")
    return lines


def summary_section(meta: dict[str, Any]) -> str:
    """The run summary's section on run.json's `sequential` (empty when the run had none)."""
    data = meta.get("sequential")
    if not isinstance(data, dict) or "reason" not in data:
        return ""
    head = f"\n## Sequential comparison: {str(data.get('outcome', '')).upper()}\n\n"
    if "tasks_used" not in data:  # refused or failed: the reason alone
        return head + f"{data['reason']}\n"
    return head + "\n".join([f"Baseline: `{data.get('baseline', '')}`.", "",
                             *markdown_lines(data)]) + "\n"
