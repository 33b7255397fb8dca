"""Markdown, CSV and JSON renderings of the summary, paired and gate reports (see SCHEMA.md).

Everything from the records (task ids, signatures, reasons) is untrusted agent or task output:
markdown cells are escaped (md.py) so that it cannot break a table or inject HTML. The engine
and infrastructure-retry sections come from engine_report.py.
"""

from __future__ import annotations

import csv
import heapq
import io
import json
import math
from typing import Any, Protocol

import numpy as np

import pytest_agentbench.reporting.engine_report as engine_report
from pytest_agentbench.reporting.gate import GateResult
from pytest_agentbench.reporting.md import MD_ROWS
from pytest_agentbench.reporting.md import cell as cell
from pytest_agentbench.reporting.md import interval as _interval
from pytest_agentbench.reporting.md import num as num
from pytest_agentbench.reporting.md import para as para
from pytest_agentbench.reporting.md import pct as pct
from pytest_agentbench.reporting.md import table as table
from pytest_agentbench.reporting.paired import PairedReport
from pytest_agentbench.reporting.resources import describe as describe_resources
from pytest_agentbench.reporting.resources import show

PAIR_COLUMNS = ["task_id", "attempt_index", "suite", "a_passed", "b_passed", "outcome"]
GATE_COLUMNS = [
    "baseline_run_id", "candidate_run_id", "regression", "exit_code", "max_drop", "margin",
    "alpha", "observed_drop", "drop_upper_bound", "pairs", "tasks", "pass_rate_a", "pass_rate_b",
    "mcnemar_test", "mcnemar_pvalue", "bootstrap_ci_low", "bootstrap_ci_high", "seed",
    "resamples", "outcome", "mde",
]


class RenderableSummary(Protocol):
    """What the summary renderings read: a `summary.RunSummary`. Named by its shape so that
    this module does not import summary.py, whose `write_summary` renders with it."""

    @property
    def data(self) -> dict[str, Any]: ...

    @property
    def tables(self) -> dict[str, Any]: ...


def json_safe(value: Any) -> Any:
    """Plain JSON types: numpy scalars unwrapped, NaN and infinities as null."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n"


def summary_markdown(summary: RenderableSummary) -> str:
    d = summary.data
    run, c, pr, usage = d["run"], d["counts"], d["pass_rate"], d["usage"]
    out = [f"# Run summary: {cell(run['run_id'])}", "",
           f"Variant **{cell(run['variant'])}**, harness {cell(run['harness_version'])}, "
           f"started {cell(run['started_at'])}, run dir `{cell(run['path'])}`.", "",
           _task_line(c), "",
           "## Pass rate", "",
           f"**{pct(pr['rate'])}** ({pr['passed']}/{pr['scored']} scored attempts), "
           f"Wilson 95% CI {_interval(pr)}.", "",
           *_clustered_lines(d.get("pass_rate_clustered")),
           "Scored = valid, non-flaky, non-quarantined attempts; infra errors are "
           + ("counted as failures." if d["rules"]["infra_errors"] != "excluded"
              else "excluded and reported below."), ""]
    out += engine_report.engines_markdown(d)
    cats = c["tasks_by_category"]
    reasons = ", ".join(f"{k}: {v}" for k, v in c["invalid_by_reason"].items())
    infra = ", ".join(f"{k}: {v}" for k, v in c["infra_by_reason"].items())
    out += ["## Attempts by category", "", table(["category", "attempts", "tasks", "detail"], [
        ["scored (valid)", c["valid"], cats.get("scored", 0), ""],
        ["invalid task", c["invalid"], cats.get("invalid", 0), reasons],
        ["flaky baseline", c["flaky"], cats.get("flaky", 0), ""],
        ["quarantined", c["quarantined"], cats.get("quarantined", 0), ""],
        ["infra error", c["infra_errors"], cats.get("infra", 0), infra],
    ]), ""]
    out += ["## By suite", "", table(
        ["suite", "scored", "passed", "pass rate", "95% CI", "invalid", "flaky", "quarantined",
         "infra"],
        [[s["suite"], s["scored"], s["passed"], pct(s["rate"]), _interval(s), s["invalid"],
          s["flaky"], s["quarantined"], s["infra_errors"]] for s in d["suites"]], None), ""]
    dist_rows = [[name, x["count"], num(x["median"]), num(x["p25"]), num(x["p75"]),
                  num(x["max"])]
                 for name, x in (("time to pass (s)", d["time_to_pass_sec"]),
                                 ("steps to pass", d["steps_to_pass"]))]
    out += ["## Time and steps to pass", "",
            table(["metric", "passes", "median", "p25", "p75", "max"], dist_rows), ""]
    out += ["## Tokens and cost", "", table(["measure", "value"], [
        ["total tokens (all attempts)", f"{usage['total_tokens']:,}"],
        ["cost USD (all attempts)", f"{usage['cost_usd']:.4f}"],
        ["attempts with a known cost", usage["cost_known_attempts"]],
        ["tokens per pass", num(usage["tokens_per_pass"], 0)],
        ["cost per pass (pass@cost, USD)", num(usage["cost_per_pass_usd"], 4)],
        *_cost_interval_rows(usage.get("cost_per_pass")),
    ]), ""]
    out += _resource_lines(d.get("resources"))
    if d["pass_at_k"]:
        out += ["## pass@k and pass^k (unbiased estimators)", "",
                "pass@k: at least one of k attempts passes; pass^k: all k attempts pass "
                "(reliability). Both drawn without replacement from each task's attempts.", "",
                table(["k", "pass@k", "pass^k", "tasks with ≥ k attempts"],
                      [[r["k"], pct(r["value"]), pct(r.get("pass_hat_k")), r["tasks"]]
                       for r in d["pass_at_k"]], None), ""]
    out += _task_rate_lines(d.get("tasks") or [])
    if d.get("invalid_tasks"):
        out += ["## Invalid tasks", "",
                "Tasks at fault (their spec or baseline), never scored against the agent:", "",
                table(["task", "suite", "attempts", "reasons", "problems"],
                      [[r["task_id"], r["suite"], r["attempts"], ", ".join(r["reasons"]),
                        "; ".join(r["problems"])] for r in d["invalid_tasks"]]), ""]
    tax = d["taxonomy"]
    out += ["## Failure taxonomy", "", table(
        ["suite", "reason", "blame", "attempts"],
        [[r["suite"], r["reason"], r["blame"], r["count"]] for r in tax["by_suite"]]), "",
        "By task (most non-passing attempts first):", "",
        _task_table(tax["by_task"]),
        ""]
    out += ["## Hardest tasks", "", table(
        ["task", "suite", "attempts", "passed", "pass rate", "top reason", "artifacts"],
        [[r["task_id"], r["suite"], r["attempts"], r["passed"], pct(r["rate"]),
          r["top_reason"], r["task_dir"]] for r in d["hardest_tasks"]]), ""]
    out += ["## Most common failure signatures", "", table(
        ["attempts", "tasks", "top reason", "signature", "examples"],
        [[r["count"], r["tasks"], r["top_reason"], r["signature"], ", ".join(r["examples"])]
         for r in d["failure_signatures"]]), ""]
    if d["warnings"]:
        out += ["## Warnings", ""] + [f"- {cell(w)}" for w in d["warnings"]] + [""]
    return "\n".join(out)


_CLUSTER_METHODS = {
    "cr1": "cluster-robust (CR1) standard error by task, Student t interval",
    "wilson_tasks": "Wilson over tasks: every task has the same pass rate, so the "
                    "cluster-robust error is 0",
}


def _clustered_lines(cl: dict[str, Any] | None) -> list[str]:
    """The interval clustered by task, when some task has several scored attempts."""
    if not cl:
        return []
    return [f"Clustered by task ({cl['tasks']} tasks, up to {cl['max_attempts_per_task']} "
            f"attempts each): **95% CI {_interval(cl)}**, "
            f"{_CLUSTER_METHODS.get(cl['method'], cell(cl['method']))}; design effect "
            f"{cl['design_effect']:.2f} (effective sample {cl['effective_n']:,.0f} attempts). "
            "This is the headline interval: attempts of one task are not independent.", ""]


def _cost_interval_rows(cpp: dict[str, Any] | None) -> list[list[Any]]:
    if not cpp or cpp.get("value") is None:
        return []
    how = {"cluster_bootstrap_percentile": f"cluster bootstrap over tasks, {cpp['resamples']} "
                                           f"resamples, seed {cpp['seed']}",
           "delta_cluster_robust": "delta method, cluster-robust by task"}
    if cpp.get("method") is None:
        return []
    low = num(cpp["ci_low"], 4)
    high = ("unbounded: over 2.5% of resamples hold no pass" if cpp["ci_high"] is None
            else num(cpp["ci_high"], 4))
    return [[f"cost per solved task, 95% CI (USD; {how.get(cpp['method'], cpp['method'])})",
             f"{num(cpp['value'], 4)} [{low}, {high}]"]]


def _task_rate_lines(tasks: list[dict[str, Any]]) -> list[str]:
    """Per-task pass rates (present when some task has several scored attempts): how many
    tasks always, sometimes and never passed, and the least reliable tasks first."""
    if not tasks:
        return []
    always = sum(1 for r in tasks if r["passed"] == r["attempts"])
    never = sum(1 for r in tasks if r["passed"] == 0)
    shown = sorted(tasks, key=lambda r: (r["rate"], -r["attempts"], r["task_id"]))[:MD_ROWS]
    rows = [[r["task_id"], r["suite"], r["attempts"], r["passed"], pct(r["rate"]), _interval(r)]
            for r in shown]
    more = len(tasks) - len(shown)
    note = [f"\n_{more} more task(s) in the JSON form and the CSV (scope_type task)._"] \
        if more else []
    return ["## Per-task pass rates", "",
            f"{len(tasks)} tasks with scored attempts: {always} always passed, "
            f"{len(tasks) - always - never} sometimes, {never} never.", "",
            table(["task", "suite", "attempts", "passed", "pass rate", "95% CI (Wilson)"], rows,
                  None), *note, ""]


_TASK_KINDS = (("scored", "scored"), ("invalid", "invalid"), ("flaky", "flaky"),
               ("quarantined", "quarantined"), ("infra", "with infra errors"))


def _task_line(c: dict[str, Any]) -> str:
    """Tasks and attempts, never mixed: '**4 tasks** (3 scored, 1 invalid), 7 attempts.'"""
    cats = c["tasks_by_category"]
    parts = [f"{cats[k]} {label}" for k, label in _TASK_KINDS if cats.get(k)]
    detail = f" ({', '.join(parts)})" if parts else ""
    line = (f"**{c['tasks']} task{'s' if c['tasks'] != 1 else ''}**{detail}, "
            f"{c['attempts']} attempt{'s' if c['attempts'] != 1 else ''}.")
    if sum(cats.get(k, 0) for k, _ in _TASK_KINDS) > c["tasks"]:
        line += " A task with attempts in several categories counts in each."
    return line


def _task_table(by_task: list[dict[str, Any]]) -> str:
    """Tasks by non-passing attempts, most first: only the shown rows are formatted (a run
    of 100,000 tasks has tens of thousands of them; formatting all cost 0.15 s)."""
    totals = [sum(r["reasons"].values()) for r in by_task]
    order = heapq.nsmallest(MD_ROWS, range(len(by_task)),
                            key=lambda i: (-totals[i], by_task[i]["task_id"]))
    rows = [[by_task[i]["task_id"], by_task[i]["suite"], totals[i],
             ", ".join(f"{k}: {v}" for k, v in sorted(by_task[i]["reasons"].items()))]
            for i in order]
    text = table(["task", "suite", "non-passing attempts", "reasons"], rows, None)
    more = len(by_task) - len(rows)
    return text + (f"\n\n_{more} more row(s) in the JSON form._" if more else "")


def summary_csv(summary: RenderableSummary) -> str:
    buf = io.StringIO()
    summary.tables["scopes"].to_csv(buf, index=False, lineterminator="\n", float_format="%.10g")
    return buf.getvalue()


def _resource_lines(policy: dict[str, Any] | None) -> list[str]:
    """The resource policy the run's attempts ran under (reporting/resources.py run_policy)."""
    if policy is None:
        return []

    def values(rows: list[dict[str, Any]]) -> str:
        if len(rows) == 1:
            return show(rows[0]["value"])
        return ", ".join(f"{show(r['value'])} ({r['attempts']} attempts)" for r in rows)

    rows = [[f["field"], values(f["values"])] for f in policy["fields"] if f["values"]]
    rows += [["resources scale", values(policy["resources_scale"])],
             ["OOM kills", policy["oom_kills"]]]
    return ["## Resources", "",
            f"What the {policy['attempts']} attempts' sandboxes ran under (after "
            "--agentbench-resources-scale); runs that differ here are paired only with "
            "--allow-resource-difference.", "", table(["limit", "value"], rows), ""]


def render_summary(summary: RenderableSummary, fmt: str) -> str:
    if fmt == "md":
        return summary_markdown(summary)
    if fmt == "csv":
        return summary_csv(summary)
    if fmt == "json":
        return to_json(summary.data)
    raise ValueError(f"unknown format {fmt!r}")


def paired_markdown(data: dict[str, Any], heading: str = "#") -> str:
    a, b, t = data["run_a"], data["run_b"], data["table"]
    pi, ex, mc, bs = data["pairing"], data["exclusions"], data["mcnemar"], data["bootstrap"]
    allowed = ", ".join(f"{k} ({v} tasks)" for k, v in pi["allowed_mismatches"].items())
    out = [f"{heading} Paired comparison: A = {cell(a['variant'])} vs B = {cell(b['variant'])}",
           "", f"A: `{cell(a['run_id'])}`; B: `{cell(b['run_id'])}`.", "",
           f"Pairs joined on ({pi['join']}): **{data['pairs']} pairs over {data['tasks']} "
           f"tasks**. Tasks: A {pi['tasks_a']}, B {pi['tasks_b']}, common {pi['common_tasks']}; "
           f"missing policy `{pi['missing_policy']}` (only in A: {len(pi['only_in_a'])}, only "
           f"in B: {len(pi['only_in_b'])}, unpaired attempts dropped: "
           f"{pi['unpaired_attempts']}). Mismatches allowed: {cell(allowed or 'none')}.", "",
           *([f"**{para(resources_note)}**", ""] if (resources_note := describe_resources(
               pi.get("resource_differences") or [])) else []),
           f"Exclusions ({cell(ex['rule'])}): {ex['invalid_or_flaky_tasks']} invalid or flaky "
           f"task(s) ({ex['invalid_or_flaky_pairs']} pairs), {ex['quarantined_pairs']} "
           f"quarantined pair(s), {ex['infra_pairs']} infra-error pair(s).", "",
           table(["", "B passed", "B failed"], [["A passed", t["both_pass"], t["a_only"]],
                                                ["A failed", t["b_only"], t["both_fail"]]]), "",
           f"Pass rate A {pct(data['pass_rate_a'])}, B {pct(data['pass_rate_b'])}; "
           f"difference B − A = **{_signed_pts(data['difference'])}**.", "",
           f"- McNemar ({mc['test']}, {mc['discordant']} discordant pairs): statistic "
           f"{mc['statistic']:.4g}, **p = {mc['pvalue']:.6g}**.",
           f"- Paired bootstrap over tasks ({bs['interval']}, {bs['resamples']} resamples, seed "
           f"{bs['seed']}): {bs['confidence'] * 100:.0f}% CI for B − A "
           f"[{_signed_pts(bs['ci_low'])}, {_signed_pts(bs['ci_high'])}].",
           f"- Primary method: {data['method']}; at alpha = {data['alpha']} the difference is "
           f"**{'significant' if data['significant'] else 'not significant'}**."]
    out += [f"- {data[key]['summary_line']}" for key in ("power", "task_level")
            if (data.get(key) or {}).get("summary_line")]
    return "\n".join([*out, ""])


def _signed_pts(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.1f} pts"


def paired_csv(report: PairedReport) -> str:
    buf = io.StringIO()
    report.pairs[PAIR_COLUMNS].to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


def render_paired(report: PairedReport, fmt: str) -> str:
    if fmt == "md":
        return paired_markdown(report.data)
    if fmt == "csv":
        return paired_csv(report)
    if fmt == "json":
        return to_json(report.data)
    raise ValueError(f"unknown format {fmt!r}")


def gate_row(data: dict[str, Any]) -> dict[str, Any]:
    p = data["paired"]
    return {
        "baseline_run_id": data["baseline"]["run_id"],
        "candidate_run_id": data["candidate"]["run_id"],
        "regression": data["regression"], "exit_code": data["exit_code"],
        "max_drop": data["max_drop"], "margin": data["margin"], "alpha": data["alpha"],
        "observed_drop": data["observed_drop"], "drop_upper_bound": data["drop_upper_bound"],
        "pairs": p["pairs"], "tasks": p["tasks"], "pass_rate_a": p["pass_rate_a"],
        "pass_rate_b": p["pass_rate_b"], "mcnemar_test": p["mcnemar"]["test"],
        "mcnemar_pvalue": p["mcnemar"]["pvalue"], "bootstrap_ci_low": p["bootstrap"]["ci_low"],
        "bootstrap_ci_high": p["bootstrap"]["ci_high"], "seed": p["bootstrap"]["seed"],
        "resamples": p["bootstrap"]["resamples"],
        "outcome": data["outcome"], "mde": data["mde"],
    }


def render_gate(result: GateResult, fmt: str) -> str:
    data = result.data
    if fmt == "json":
        return to_json(data)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, GATE_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerow({k: ("" if v is None else v) for k, v in json_safe(gate_row(data)).items()})
        return buf.getvalue()
    if fmt == "md":
        head = str(data["outcome"]).upper()  # REGRESSION, INCONCLUSIVE or OK
        return "\n".join([f"# Regression gate: {head}", "", para(data["verdict"]), "",
                          paired_markdown(data["paired"], heading="##")])
    raise ValueError(f"unknown format {fmt!r}")
