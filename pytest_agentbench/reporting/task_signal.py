"""`agentbench report tasks`: which tasks tell variants apart, and which only spend compute.

Over several runs (by default every run of the output root), per task: its pass rate per variant
(runs of one variant name pool their attempts), the spread of those rates, and a signal:
- `discriminating`: at least two variants scored the task and their pass rates differ by at
  least `min_spread` (default 0.5; with one attempt per task this is "passed by one variant,
  failed by another");
- `never-passed`: every variant scored it and no scored attempt passed;
- `always-passed`: every variant scored it and every scored attempt passed;
- `weak`: two variants' rates differ, but by less than `min_spread`;
- `partial`: some variant has no scored attempt of it (not run, or only infra errors and task
  problems there) and those that have do not tell apart; `one-variant`: the runs hold a single
  variant, which passed the task sometimes.
Only scored attempts count (`summary.scored_mask`): attempts of invalid, flaky or quarantined
tasks and infra errors are left out (`infra_as_failure` counts infra errors as failures, as in
the summary); a task with no scored attempt in any run is listed under `unscored`.
Each task also gets its test adequacy (`adequacy`, a column once some task has one) from
`validate-tasks --run --adequacy`, kept under each run's output root (reporting/validations.py):
shown only when every run of the task saw the content it was validated at; otherwise none,
and a line under "Adequacy not shown" (`adequacy_notes`) says why.

No item-response model is fitted. The project's dependencies carry no IRT implementation, and a
Rasch or 2PL fit estimates one ability per variant from the variants themselves: with the two
to five variants of a typical comparison, a task's discrimination parameter rests on two to five
points and its difficulty is unidentified for tasks every variant passes or fails (the
estimates run to infinity). The raw rates and their spread say what such a fit could, honestly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from pytest_agentbench.reporting.load import Run
from pytest_agentbench.reporting.md import cell, pct, table
from pytest_agentbench.reporting.names import ATTEMPTS_FILE, ReportError
from pytest_agentbench.reporting.summary import scored_mask
from pytest_agentbench.reporting.validations import AdequacyView, runs_adequacy

MIN_SPREAD = 0.5
SIGNALS = ("discriminating", "weak", "partial", "one-variant", "never-passed", "always-passed")


def runs_in(root: Path) -> list[Path]:
    """Every run directory of the output root that recorded attempts, by name."""
    if not root.is_dir():
        raise ReportError(f"{root}: no such output root (name runs, or give --out DIR)")
    found = sorted(p for p in root.iterdir()
                   if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")
                   and (p / ATTEMPTS_FILE).is_file())
    if not found:
        raise ReportError(f"{root}: no run directory with {ATTEMPTS_FILE} in this output root")
    return found


def task_signal(runs: Sequence[Run], min_spread: float = MIN_SPREAD,
                infra_as_failure: bool = False) -> dict[str, Any]:
    """The JSON document of `report tasks` over `runs`."""
    if not 0 < min_spread <= 1:
        raise ReportError(f"--min-spread {min_spread}: must be in (0, 1]")
    if not runs:
        raise ReportError("report tasks: no run given")
    frames = []
    for run in runs:
        df = run.attempts
        scored = df[scored_mask(df, infra_as_failure).to_numpy()]
        frames.append(pd.DataFrame({"task_id": scored["task_id"].astype(str),
                                    "variant": run.variant or run.run_id,
                                    "passed": scored["passed"].astype(bool)}))
    scored = pd.concat(frames, ignore_index=True)
    variants = list(dict.fromkeys(r.variant or r.run_id for r in runs))
    all_tasks = sorted({str(t) for r in runs for t in r.attempts["task_id"].unique()})
    counts = scored.groupby(["task_id", "variant"], sort=True)["passed"].agg(["sum", "count"])
    rows: list[dict[str, Any]] = []
    for task_id, per in counts.groupby(level=0, sort=True):
        rates = {str(v): {"passed": int(s), "attempts": int(n), "rate": float(s) / float(n)}
                 for (_, v), s, n in zip(per.index, per["sum"], per["count"], strict=True)}
        values = [r["rate"] for r in rates.values()]
        spread = max(values) - min(values)
        rows.append({"task_id": str(task_id), "rates": rates, "spread": spread,
                     "signal": _signal(values, spread, min_spread, len(variants))})
    rows.sort(key=lambda r: (-r["spread"], r["task_id"]))
    adequacy, adequacy_notes = runs_adequacy(runs, [r["task_id"] for r in rows])
    for row in rows:
        row["adequacy"] = adequacy.get(row["task_id"])
    seen = {r["task_id"] for r in rows}
    by_signal = {s: [r["task_id"] for r in rows if r["signal"] == s] for s in SIGNALS}
    return {
        "report": "tasks",
        "runs": [{"run_id": r.run_id, "variant": r.variant or r.run_id, "path": str(r.path)}
                 for r in runs],
        "variants": variants,
        "min_spread": min_spread,
        "infra_as_failure": infra_as_failure,
        "tasks": rows,
        "counts": {s: len(ids) for s, ids in by_signal.items()} | {"tasks": len(rows)},
        "never_passed": by_signal["never-passed"],
        "always_passed": by_signal["always-passed"],
        "discriminating": by_signal["discriminating"],
        "unscored": [t for t in all_tasks if t not in seen],
        "adequacy_notes": adequacy_notes,
        "irt": "not fitted: no IRT implementation among the dependencies, and too few variants "
               "to estimate per-task discrimination (see pytest_agentbench/reporting/"
               "task_signal.py)",
    }


def _signal(rates: list[float], spread: float, min_spread: float, variants: int) -> str:
    if spread >= min_spread - 1e-12:
        return "discriminating"
    if len(rates) < variants:
        return "partial"
    if max(rates) == 0:
        return "never-passed"
    if min(rates) == 1:
        return "always-passed"
    return "weak" if len(rates) > 1 else "one-variant"


def render_tasks(data: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=False) + "\n"
    variants = data["variants"]
    counts = data["counts"]
    lines = ["# Task signal", "",
             f"{len(data['runs'])} run(s), {len(variants)} variant(s): "
             + ", ".join(cell(v) for v in variants) + ".",
             f"Scored attempts only; discriminating = pass rates of two variants differ by at "
             f"least {pct(data['min_spread'])}. No item-response model is fitted (too few "
             "variants; see the module docstring).", "",
             f"{counts['tasks']} task(s): {counts['discriminating']} discriminating, "
             f"{counts['weak']} weak, {counts['partial']} not scored by every variant, "
             f"{counts['one-variant']} passed sometimes by the one variant, "
             f"{counts['never-passed']} never passed, {counts['always-passed']} always passed"
             + (f"; {len(data['unscored'])} with no scored attempt" if data["unscored"] else "")
             + ".", ""]
    shown = any(r.get("adequacy") for r in data["tasks"])  # a column once any task has one
    rows = [[r["task_id"], *(_rate(r["rates"].get(v)) for v in variants),
             pct(r["spread"]), r["signal"], *([_adequacy(r.get("adequacy"))] if shown else [])]
            for r in data["tasks"]]
    lines.append(table(["task", *variants, "spread", "signal",
                        *(["adequacy"] if shown else [])], rows, limit=None))
    for title, key in (("Never passed", "never_passed"), ("Always passed", "always_passed"),
                       ("No scored attempt", "unscored")):
        ids = data[key]
        lines += ["", f"## {title}", "",
                  ", ".join(cell(t) for t in ids) if ids else "none"]
    if data.get("adequacy_notes"):
        lines += ["", "## Adequacy not shown", "",
                  *(f"- {cell(n)}" for n in data["adequacy_notes"])]
    return "\n".join(lines) + "\n"


def _adequacy(entry: dict[str, Any] | None) -> str:
    """The score (`0.43 weak tests` below its threshold) from validate-tasks, or —."""
    if not entry or entry.get("score") is None:
        return "—"
    return AdequacyView(float(entry["score"]), bool(entry.get("flagged"))).cell()


def _rate(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "—"
    return f"{entry['passed']}/{entry['attempts']} ({pct(entry['rate'])})"
