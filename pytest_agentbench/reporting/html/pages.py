"""The paired page (A vs B, per-task grid) and the compare page (N runs, cost frontier), each a
self-contained HTML file from the same layout as the run page (templates/base.html.j2).

Links to a run's drill-down are relative to where the page is written: `<run dir>/report.html
#task-<id>`, which opens that task on the run page (see assets.py, `openFromHash`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import pytest_agentbench.reporting.html.svg as html_svg
from pytest_agentbench.reporting.compare import CompareReport
from pytest_agentbench.reporting.html.env import pct, relative_href, render, task_href, write_atomic
from pytest_agentbench.reporting.paired import PairedReport
from pytest_agentbench.reporting.resources import describe as describe_resources

RUN_PAGE = "report.html"
MAX_PAIR_ROWS = 2000
MAX_CELLS = 20
MAX_SIGNAL_ROWS = 500
_SHORT = {"both_pass": "✓✓", "a_only": "A", "b_only": "B", "both_fail": "··"}
_LABEL = {"both_pass": "both pass", "a_only": "only A passes", "b_only": "only B passes",
          "both_fail": "neither passes"}


def _pts(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.1f} pts"


def _points(x: float) -> str:
    return f"{x * 100:.1f} pts"


def _p(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.4g}"


def _run_side(info: dict[str, Any], out: Path) -> dict[str, str]:
    page = Path(info["path"]) / RUN_PAGE
    return {"name": str(info["variant"] or info["run_id"]), "run_id": str(info["run_id"]),
            "href": relative_href(page, out)}


def _pair_rows(pairs: pd.DataFrame, href_a: str, href_b: str,
               limit: int) -> tuple[list[dict[str, Any]], int]:
    """One row per task, the discordant tasks first (most discordant pairs first), then by id."""
    if pairs.empty:
        return [], 0
    p = pairs.sort_values(["task_id", "attempt_index"], kind="stable")
    disc = p["outcome"].isin(["a_only", "b_only"])
    per = pd.DataFrame({"task_id": p["task_id"].to_numpy(), "disc": disc.to_numpy(),
                        "a": p["a_passed"].to_numpy(dtype=bool),
                        "b": p["b_passed"].to_numpy(dtype=bool)}).groupby("task_id", sort=True)
    agg = per.agg(disc=("disc", "sum"), a=("a", "sum"), b=("b", "sum"), n=("a", "size"))
    agg = agg.reset_index().sort_values(["disc", "task_id"], ascending=[False, True])
    total = len(agg)
    agg = agg.head(limit)
    keep = set(agg["task_id"])
    cells: dict[str, list[dict[str, Any]]] = {}
    suites: dict[str, str] = {}
    sub = p[p["task_id"].isin(keep)]
    for task, index, outcome, suite in zip(sub["task_id"], sub["attempt_index"], sub["outcome"],
                                           sub["suite"], strict=True):
        got = cells.setdefault(str(task), [])
        suites.setdefault(str(task), str(suite))
        if len(got) < MAX_CELLS:
            got.append({"index": int(index), "outcome": outcome, "short": _SHORT[outcome],
                        "label": _LABEL[outcome]})
    rows = []
    for r in agg.itertuples(index=False):
        task = str(r.task_id)
        kind = "discordant" if r.disc else ("all-pass" if r.a == r.n and r.b == r.n else
                                            "none-pass" if r.a == 0 and r.b == 0 else "concordant")
        rows.append({"task_id": task, "suite": suites.get(task, ""), "kind": kind,
                     "cells": cells.get(task, []), "a_passed": int(r.a), "b_passed": int(r.b),
                     "n": int(r.n), "href_a": task_href(href_a, task),
                     "href_b": task_href(href_b, task)})
    return rows, total


def _extras(d: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """`power` and `task_level` (paired.py adds them when it can) as key/value rows; an absent
    section or key is left out. Per-task lists are not shown: the grid below has the tasks."""
    out = []
    power = d.get("power")
    if isinstance(power, dict) and power:
        rows = [("in short", str(power["summary_line"]))] if power.get("summary_line") else []
        for key, label, fmt in (("mde", "minimum detectable effect", _points),
                                ("pairs", "pairs", str), ("effective_pairs", "effective pairs",
                                                          _num),
                                ("discordance", "discordance", pct),
                                ("design_effect", "design effect", _num), ("icc", "ICC", _num),
                                ("power", "power", pct), ("alpha", "alpha", _num)):
            if power.get(key) is not None:
                rows.append((label, fmt(power[key])))
        out.append(("Power (McNemar)", rows))
    task = d.get("task_level")
    if isinstance(task, dict) and task:
        rows = []
        if task.get("tasks") is not None:
            rows.append(("tasks", str(task["tasks"])))
        for key, label in (("mean_rate_a", "mean per-task pass rate A"),
                           ("mean_rate_b", "mean per-task pass rate B")):
            if task.get(key) is not None:
                rows.append((label, pct(task[key])))
        if task.get("mean_difference") is not None:
            bs = task.get("bootstrap") or {}
            ci = ("" if bs.get("ci_low") is None
                  else f", task bootstrap [{_pts(bs['ci_low'])}, {_pts(bs['ci_high'])}]")
            rows.append(("mean difference B − A", _pts(task["mean_difference"]) + ci))
        for key, label in (("clustered_mcnemar", "clustered McNemar p"),
                           ("t_test", "paired t-test p"), ("wilcoxon", "Wilcoxon p")):
            part = task.get(key)
            if isinstance(part, dict) and part.get("pvalue") is not None:
                rows.append((label, _p(part["pvalue"])))
        if task.get("small_sample"):  # the large-sample tests above are hidden: say why
            rows.append(("paired t, Wilcoxon, clustered McNemar", str(task["small_sample"])))
        out.append(("Task level (every attempt, tasks as units)", rows))
    return out


def _num(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def render_paired_html(report: PairedReport, out: Path, max_rows: int = MAX_PAIR_ROWS) -> str:
    d = report.data
    out = Path(out)
    a, b = _run_side(d["run_a"], out), _run_side(d["run_b"], out)
    rows, total = _pair_rows(report.pairs, a["href"], b["href"], max_rows)
    t, mc, bs = d["table"], d["mcnemar"], d["bootstrap"]
    ci = "—" if bs["ci_low"] is None else f"[{_pts(bs['ci_low'])}, {_pts(bs['ci_high'])}]"
    cards = [
        {"key": "rate-a", "label": f"A pass rate ({a['name']})", "value": pct(d["pass_rate_a"]),
         "sub": f"over {d['pairs']} pairs, {d['tasks']} tasks"},
        {"key": "rate-b", "label": f"B pass rate ({b['name']})", "value": pct(d["pass_rate_b"]),
         "sub": f"over {d['pairs']} pairs, {d['tasks']} tasks"},
        {"key": "difference", "label": "B − A", "value": _pts(d["difference"]),
         "sub": f"task bootstrap {bs['confidence'] * 100:.0f}% {ci}"},
        {"key": "mcnemar", "label": "McNemar p", "value": _p(mc["pvalue"]),
         "sub": f"{mc['discordant']} discordant pairs: {t['a_only']} only A, {t['b_only']} only B"
                + (" · significant" if d["significant"] else " · not significant")
                + f" at α={d['alpha']:g}"},
        {"key": "table", "label": "pairs", "value": str(d["pairs"]),
         "sub": f"{t['both_pass']} both pass · {t['both_fail']} neither"},
    ]
    ex = d["exclusions"]
    notes = [f"Excluded: {ex['invalid_or_flaky_tasks']} task(s) invalid or flaky in either run "
             f"({ex['invalid_or_flaky_pairs']} pairs), {ex['quarantined_pairs']} quarantined "
             f"pair(s), {ex['infra_pairs']} pair(s) with an infra error"
             + (" (counted as failures)." if ex["infra_counted_as_failure"] else ".")]
    resources_note = describe_resources(d["pairing"].get("resource_differences") or [])
    if resources_note:
        notes.insert(0, resources_note)
    return render("paired.html.j2", a=a, b=b, cards=cards, notes=notes, extras=_extras(d),
                  rows=rows, total=total, more=total > len(rows))


def write_paired_html(report: PairedReport, out: str | Path) -> Path:
    path = Path(out)
    return write_atomic(path, render_paired_html(report, path))


def render_compare_html(report: CompareReport, out: Path) -> str:
    d = report.data
    out = Path(out)
    runs, points = [], []
    for r in d["runs"]:
        p = r["paired"]
        boot = ""
        if p is not None and not p["note"]:
            bl = p["bootstrap"]
            boot = ("—" if bl["ci_low"] is None
                    else f"[{_pts(bl['ci_low'])}, {_pts(bl['ci_high'])}]")
        runs.append({
            "run": r["run"], "variant": r["variant"], "baseline": r["baseline"],
            "href": relative_href(Path(r["path"]) / RUN_PAGE, out), "scored": r["scored"],
            "rate": pct(r["pass_rate"]),
            "ci": "—" if r["ci_low"] is None else f"[{pct(r['ci_low'])}, {pct(r['ci_high'])}]",
            "diff": "" if r["baseline"] else _pts(r["diff_vs_baseline"]),
            "cost": _usd(r["cost_per_attempt_usd"]), "per_pass": _usd(r["cost_per_pass_usd"]),
            "p": ("(baseline)" if p is None else p["note"] or _p(p["mcnemar"]["pvalue"])),
            "boot": boot, "frontier": r["frontier"]})
        points.append({"name": r["run"], "cost": r["cost_per_attempt_usd"],
                       "rate": r["pass_rate"], "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                       "frontier": r["frontier"]})
    chart = html_svg.frontier_chart(points, "cost per scored attempt (USD)")
    unknown = [pt["name"] for pt in points if pt["cost"] is None]
    note = ("Filled points joined by the green line: the frontier (no other run is both cheaper "
            "and better); hollow points are dominated. Bars: Wilson 95% intervals.")
    if unknown:
        note += " Not drawn (no known cost): " + ", ".join(str(n) for n in unknown) + "."
    if chart is None:
        note = "No run has a known cost: nothing to draw."
    rule = ("infra errors counted as failures" if d["rules"]["infra_errors"] != "excluded"
            else "infra errors excluded")
    warnings = [f"{r['run']}: {w}" for r in d["runs"] for w in r["warnings"]]
    resource_notes = [f"{r['run']}: {describe_resources(r['resource_differences'])}"
                      for r in d["runs"] if r.get("resource_differences")]
    return render("compare.html.j2", runs=runs, baseline=d["baseline"], rule=rule,
                  frontier={"title": "Pass rate vs cost per scored attempt", "chart": chart,
                            "note": note, "id": "frontier"}, warnings=warnings,
                  resource_notes=resource_notes,
                  sensitivity=_sensitivity(d.get("resource_sensitivity") or []),
                  signal=_signal(report, d["rules"]["infra_errors"] != "excluded"))


def _sensitivity(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"scale": f"{r['scale']:g}", "runs": ", ".join(r["runs"]),
             "cpu": "—" if r["cpu_limit_median"] is None else f"{r['cpu_limit_median']:g}",
             "mem": "—" if r["mem_limit_mb_median"] is None else f"{r['mem_limit_mb_median']:g}",
             "scored": str(r["scored"]), "rate": pct(r["pass_rate"]),
             "ci": "—" if r["ci_low"] is None else f"[{pct(r['ci_low'])}, {pct(r['ci_high'])}]",
             "oom": str(r["oom_kills"])} for r in rows]


def _signal(report: CompareReport, infra_as_failure: bool) -> dict[str, Any] | None:
    """`report tasks` over the compared runs (reporting/task_signal.py): per task its pass
    rate per variant and signal, most discriminating first, at most MAX_SIGNAL_ROWS."""
    if not report.runs:
        return None
    from pytest_agentbench.reporting.task_signal import task_signal

    data = task_signal(report.runs, infra_as_failure=infra_as_failure)
    variants = data["variants"]
    rows = []
    for t in data["tasks"][:MAX_SIGNAL_ROWS]:
        rates = [t["rates"].get(v) for v in variants]
        rows.append({"task_id": t["task_id"], "signal": t["signal"], "spread": pct(t["spread"]),
                     "rates": ["—" if r is None else f"{r['passed']}/{r['attempts']} "
                               f"({pct(r['rate'])})" for r in rates]})
    return {"variants": variants, "rows": rows, "counts": data["counts"],
            "more": max(0, len(data["tasks"]) - MAX_SIGNAL_ROWS),
            "never": data["never_passed"], "always": data["always_passed"],
            "unscored": data["unscored"]}


def _usd(x: float | None) -> str:
    return "—" if x is None else f"${x:.4f}"


def write_compare_html(report: CompareReport, out: str | Path) -> Path:
    path = Path(out)
    return write_atomic(path, render_compare_html(report, path))
