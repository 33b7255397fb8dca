"""The run summary: agent pass rates kept apart from invalid, flaky, quarantined and infra attempts.

Stated rules (also written into every summary under `rules`):
- Agent statistics use `scored` attempts only: the task is valid (`is_valid_task`), its baseline
  is not flaky, it is not quarantined, and the attempt did not end in an infra error.
- Infra errors (SANDBOX_ERROR, LLM_ERROR) are excluded from pass rates by default, reported on
  their own; `infra_as_failure=True` counts them as agent failures instead.
- Pass rates are per attempt with a Wilson 95% interval (attempts treated as independent);
  pass@k uses the unbiased estimator per task, averaged over tasks with at least k attempts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

import pytest_agentbench.reporting.stats as stats
from pytest_agentbench.reporting.engine_report import engine_figures
from pytest_agentbench.reporting.load import Run, load_run

if TYPE_CHECKING:
    from pytest_agentbench.text.redaction import Redactor

SCHEMA_VERSION = 1
SUMMARY_FILE = "report_summary.md"

_HEX = re.compile(r"0x[0-9a-fA-F]+|\b[0-9a-f]{8,}\b")
_NUM = re.compile(r"\d+(\.\d+)?")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_SPACE = re.compile(r"\s+")


@dataclass
class RunSummary:
    """All figures of one run; `data` is the stable JSON document, `tables` the CSV scopes."""

    data: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def normalize_summary(text: str, limit: int = 160) -> str:
    """Normalized failure text for clustering: numbers, hex ids and quoted values masked."""
    text = _HEX.sub("<hex>", text)
    text = _QUOTED.sub("<str>", text)
    text = _NUM.sub("<n>", text)
    return _SPACE.sub(" ", text).strip()[:limit]


def scored_mask(frame: pd.DataFrame, infra_as_failure: bool = False) -> pd.Series:
    cat = frame["category"]
    mask = cat == "scored"
    if infra_as_failure:
        mask = mask | (cat == "infra")
    return mask


_rate_row = stats.rate_row


def summarize(run: Run, infra_as_failure: bool = False, top: int = 10) -> RunSummary:
    df = run.attempts
    scored = scored_mask(df, infra_as_failure)
    sdf = df[scored]
    passes = sdf[sdf["passed"]]
    data: dict[str, Any] = {
        "schema": "agentbench.summary",
        "schema_version": SCHEMA_VERSION,
        "run": {"run_id": run.run_id, "variant": run.variant,
                "harness_version": run.harness_version,
                "started_at": run.meta.get("started_at"), "path": str(run.path)},
        "rules": {
            "scored": "valid, non-flaky, non-quarantined attempts",
            "infra_errors": "counted_as_failure" if infra_as_failure else "excluded",
            "interval": "wilson", "confidence": 0.95, "unit": "attempt",
        },
        "counts": _counts(df, sdf),
        "pass_rate": _rate_row(int(sdf["passed"].sum()), len(sdf)),
        "suites": _suite_rows(df, scored),
        "time_to_pass_sec": stats.describe(passes["duration_sec"].to_numpy()),
        "steps_to_pass": stats.describe(passes["steps"].to_numpy()),
        "usage": _usage(df, sdf),
        "taxonomy": _taxonomy(df),
        "invalid_tasks": _invalid_tasks(df),
        "hardest_tasks": _hardest(sdf, top),
        "failure_signatures": _signatures(sdf, top),
        "pass_at_k": _pass_at_k(sdf),
        **engine_figures(df, scored),  # "engines", "infra_retries"
        "warnings": list(run.warnings),
    }
    return RunSummary(data=data, tables={"scopes": _scope_table(df, scored, run)})


def _counts(df: pd.DataFrame, sdf: pd.DataFrame) -> dict[str, Any]:
    cat = df["category"].value_counts()
    reasons = df.loc[df["category"] == "invalid", "failure_reason"].value_counts()
    infra = df.loc[df["category"] == "infra", "failure_reason"].value_counts()
    tasks = df.groupby("category", observed=False)["task_id"].nunique()
    return {
        "attempts": len(df),
        "tasks": int(df["task_id"].nunique()),
        "scored": len(sdf),
        "passed": int(sdf["passed"].sum()),
        "failed": int((~sdf["passed"]).sum()),
        "valid": int(cat.get("scored", 0)),
        "invalid": int(cat.get("invalid", 0)),
        "invalid_by_reason": {str(k): int(v) for k, v in sorted(reasons.items())},
        "flaky": int(cat.get("flaky", 0)),
        "quarantined": int(cat.get("quarantined", 0)),
        "infra_errors": int(cat.get("infra", 0)),
        "infra_by_reason": {str(k): int(v) for k, v in sorted(infra.items())},
        "tasks_by_category": {str(k): int(v) for k, v in tasks.items()},
    }


def _suite_rows(df: pd.DataFrame, scored: pd.Series) -> list[dict[str, Any]]:
    cats = df.groupby(["suite", "category"], observed=False).size()
    grouped = df[scored].groupby("suite")["passed"].agg(["sum", "count"])
    rows = []
    for suite in sorted(df["suite"].unique()):
        per_cat = {str(cat): int(n) for (s, cat), n in cats.items() if s == suite}
        rows.append({"suite": str(suite), "attempts": sum(per_cat.values()),
                     **_rate_row(int(grouped["sum"].get(suite, 0)),
                                 int(grouped["count"].get(suite, 0))),
                     "invalid": per_cat.get("invalid", 0), "flaky": per_cat.get("flaky", 0),
                     "quarantined": per_cat.get("quarantined", 0),
                     "infra_errors": per_cat.get("infra", 0)})
    return rows


def _usage(df: pd.DataFrame, sdf: pd.DataFrame) -> dict[str, Any]:
    passes = int(sdf["passed"].sum())
    cost_known = df["cost_usd"].notna()
    cost_scored = float(sdf["cost_usd"].sum(skipna=True))
    tokens_scored = int(sdf["total_tokens"].sum())
    return {
        "prompt_tokens": int(df["prompt_tokens"].sum()),
        "completion_tokens": int(df["completion_tokens"].sum()),
        "total_tokens": int(df["total_tokens"].sum()),
        "cost_usd": float(df["cost_usd"].sum(skipna=True)),
        "cost_known_attempts": int(cost_known.sum()),
        "scored_total_tokens": tokens_scored,
        "scored_cost_usd": cost_scored,
        "tokens_per_pass": tokens_scored / passes if passes else None,
        "cost_per_pass_usd": cost_scored / passes if passes else None,
    }


def _taxonomy(df: pd.DataFrame) -> dict[str, Any]:
    """Non-pass attempts by reason, by (suite, reason) and by task ({reason: attempts})."""
    fails = df.loc[df["failure_reason"].notna(), ["suite", "task_id", "failure_reason", "blame"]]
    by_reason = fails.groupby(["failure_reason", "blame"]).size().reset_index(name="count")
    by_suite = fails.groupby(["suite", "failure_reason", "blame"]).size().reset_index(name="count")
    per_task = fails.groupby(["task_id", "failure_reason"]).size()
    first = fails.drop_duplicates("task_id")
    suite_of = dict(zip(first["task_id"], first["suite"], strict=True))
    by_task: dict[str, dict[str, int]] = {}
    index = per_task.index
    for task, reason, count in zip(index.get_level_values(0).to_numpy(dtype=object),
                                   index.get_level_values(1).to_numpy(dtype=object),
                                   per_task.to_numpy().tolist(), strict=True):
        by_task.setdefault(str(task), {})[str(reason)] = count
    return {
        "by_reason": _records(by_reason.sort_values(["count", "failure_reason"],
                                                    ascending=[False, True]),
                              rename={"failure_reason": "reason"}),
        "by_suite": _records(by_suite.sort_values(["suite", "count", "failure_reason"],
                                                  ascending=[True, False, True]),
                             rename={"failure_reason": "reason"}),
        "by_task": [{"task_id": t, "suite": str(suite_of[t]), "reasons": r}
                    for t, r in by_task.items()],
    }


def _invalid_tasks(df: pd.DataFrame, limit: int = 20) -> list[dict[str, Any]]:
    """The tasks at fault (category `invalid`), each with its reasons and problems: the lines of
    its non-pass summaries (for TASK_INVALID, the validation problems), at most `limit`."""
    bad = df.loc[df["category"] == "invalid", ["task_id", "suite", "failure_reason", "summary"]]
    tasks: dict[str, dict[str, Any]] = {}
    for task, suite, reason, text in zip(*(bad[c].to_numpy(dtype=object) for c in bad.columns),
                                         strict=True):  # plain loop: a groupby costs 0.1 ms/task
        row = tasks.setdefault(str(task), {"suite": str(suite), "reasons": set(), "attempts": 0,
                                           "texts": {}})
        row["reasons"].add(str(reason))
        row["attempts"] += 1
        row["texts"][text] = None
    out = []
    for task in sorted(tasks):
        row = tasks[task]
        lines = dict.fromkeys(line.strip() for text in row["texts"]
                              for line in str(text).splitlines() if line.strip())
        out.append({"task_id": task, "suite": row["suite"], "reasons": sorted(row["reasons"]),
                    "attempts": row["attempts"], "problems": list(lines)[:limit]})
    return out


def _records(frame: pd.DataFrame, rename: dict[str, str] | None = None) -> list[dict[str, Any]]:
    frame = frame.rename(columns=rename or {})
    out = frame.to_dict("records")
    return [{str(k): _plain(v) for k, v in row.items()} for row in out]


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and np.isnan(value):
        return None
    return value


def _task_table(sdf: pd.DataFrame) -> pd.DataFrame:
    g = sdf.groupby("task_id", sort=True)
    table = g.agg(suite=("suite", "first"), attempts=("passed", "size"),
                  passed=("passed", "sum"), task_dir=("task_dir", "first"))
    table["rate"] = table["passed"] / table["attempts"]
    return table


def _hardest(sdf: pd.DataFrame, top: int) -> list[dict[str, Any]]:
    if sdf.empty:
        return []
    table = _task_table(sdf).reset_index()
    table = table.sort_values(["rate", "attempts", "task_id"], ascending=[True, False, True])
    head = table.head(top)
    fails = sdf[~sdf["passed"] & sdf["task_id"].isin(head["task_id"])]
    top_reason = (fails.groupby(["task_id", "failure_reason"]).size().reset_index(name="n")
                  .sort_values(["task_id", "n", "failure_reason"], ascending=[True, False, True])
                  .drop_duplicates("task_id").set_index("task_id")["failure_reason"])
    head = head.assign(top_reason=head["task_id"].map(top_reason))
    return _records(head[["task_id", "suite", "attempts", "passed", "rate", "top_reason",
                          "task_dir"]])


def signature_keys(frame: pd.DataFrame) -> pd.Series:
    """Cluster key per attempt: failing test ids if recorded, else the normalized summary."""
    summaries = frame["summary"]
    uniq = pd.unique(summaries)
    normalized = dict(zip(uniq, (normalize_summary(s) for s in uniq), strict=True))
    by_summary = summaries.map(normalized)
    reason = frame["failure_reason"].fillna("FAILED").astype(str)
    fallback = reason + ": " + by_summary
    sig = pd.Series([" | ".join(v) if isinstance(v, list) else "" for v in
                     frame["signature"]], index=frame.index, dtype=object)
    return sig.where(sig != "", fallback)


def _signatures(sdf: pd.DataFrame, top: int) -> list[dict[str, Any]]:
    fails = sdf[~sdf["passed"]]
    if fails.empty:
        return []
    fails = fails.assign(key=signature_keys(fails))
    g = fails.groupby("key")
    table = g.agg(count=("task_id", "size"), tasks=("task_id", "nunique"))
    table = table.reset_index().sort_values(["count", "key"], ascending=[False, True]).head(top)
    subset = fails[fails["key"].isin(table["key"])]
    examples = subset.groupby("key")["task_id"].agg(lambda s: sorted(s.unique())[:3])
    reasons = (subset.groupby(["key", "failure_reason"]).size().reset_index(name="n")
               .sort_values(["key", "n", "failure_reason"], ascending=[True, False, True])
               .drop_duplicates("key").set_index("key")["failure_reason"])
    out = []
    for row in table.itertuples(index=False):
        out.append({"signature": row.key, "count": int(row.count), "tasks": int(row.tasks),
                    "top_reason": _plain(reasons.get(row.key)),
                    "examples": list(examples.get(row.key, []))})
    return out


def _pass_at_k(sdf: pd.DataFrame) -> list[dict[str, Any]]:
    if sdf.empty:
        return []
    per_task = sdf.groupby("task_id")["passed"].agg(["size", "sum"])
    max_n = int(per_task["size"].max())
    if max_n < 2:
        return []
    combos = per_task.groupby(["size", "sum"]).size()  # distinct (n, c) with task counts
    out = []
    for k in range(1, max_n + 1):
        total, tasks = 0.0, 0
        for (n, c), count in combos.items():
            if n >= k:
                total += stats.pass_at_k(int(n), int(c), k) * int(count)
                tasks += int(count)
        out.append({"k": k, "value": total / tasks if tasks else None, "tasks": tasks})
    return out


SCOPE_COLUMNS = [
    "run_id", "variant", "scope_type", "scope", "suite", "attempts", "scored", "passed",
    "pass_rate", "ci_low", "ci_high", "invalid", "flaky", "quarantined", "infra_errors",
    "median_time_to_pass_sec", "median_steps_to_pass", "total_tokens", "cost_usd",
    "cost_per_pass_usd",
]


def _scope_table(df: pd.DataFrame, scored: pd.Series, run: Run) -> pd.DataFrame:
    """One row per scope (overall, each suite, each task) in the stable CSV schema."""
    work = df.assign(
        _scored=scored, _pass=scored & df["passed"], overall="(all)",
        _ttp=df["duration_sec"].where(scored & df["passed"]),
        _stp=df["steps"].where(scored & df["passed"]).astype(float),
        _cost_scored=df["cost_usd"].where(scored),
    )
    for cat in ("invalid", "flaky", "quarantined", "infra"):
        work[f"_{cat}"] = df["category"] == cat
    work["_scope_suite"] = work["suite"]
    parts = []
    for scope_type, key in (("overall", "overall"), ("suite", "_scope_suite"),
                            ("task", "task_id")):
        if work.empty:
            break
        g = work.groupby(key, sort=True)
        t = g.agg(suite=("suite", "first"), attempts=("passed", "size"),
                  scored=("_scored", "sum"), passed=("_pass", "sum"),
                  invalid=("_invalid", "sum"), flaky=("_flaky", "sum"),
                  quarantined=("_quarantined", "sum"), infra_errors=("_infra", "sum"),
                  median_time_to_pass_sec=("_ttp", "median"),
                  median_steps_to_pass=("_stp", "median"), total_tokens=("total_tokens", "sum"),
                  cost_usd=("cost_usd", "sum"), _cost_scored=("_cost_scored", "sum"))
        t = t.reset_index().rename(columns={key: "scope"})
        if scope_type == "overall":
            t["suite"] = ""
        t["scope_type"] = scope_type
        parts.append(t)
    if not parts:
        return pd.DataFrame(columns=SCOPE_COLUMNS)
    table = pd.concat(parts, ignore_index=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        table["pass_rate"] = np.where(table["scored"] > 0, table["passed"] / table["scored"],
                                      np.nan)
        table["cost_per_pass_usd"] = np.where(table["passed"] > 0,
                                              table["_cost_scored"] / table["passed"], np.nan)
    table["ci_low"], table["ci_high"] = stats.wilson_arrays(table["passed"], table["scored"])
    table["run_id"] = run.run_id
    table["variant"] = run.variant
    return table[SCOPE_COLUMNS]


def write_summary(run_dir: str | Path, infra_as_failure: bool = False,
                  redactor: Redactor | None = None) -> Path:
    """Write `<run_dir>/report_summary.md` (the plugin calls this at session end).

    A run that recorded no attempt at all (no attempts.jsonl) still gets a summary saying so.
    The text passes through `redactor` (default: the credential patterns of a plain Redactor).
    """
    import pytest_agentbench.reporting.load as load
    from pytest_agentbench.reporting.render import summary_markdown
    from pytest_agentbench.text.redaction import Redactor

    path = Path(run_dir) / SUMMARY_FILE
    if (Path(run_dir) / load.ATTEMPTS_FILE).exists():
        run = load_run(run_dir, fields="summary")
    else:
        meta = load.read_meta(Path(run_dir) / load.RUN_FILE)
        run = Run(Path(run_dir), meta, load.records_to_frame([]), ("no attempt was recorded",))
    text = summary_markdown(summarize(run, infra_as_failure=infra_as_failure))
    text = (redactor or Redactor()).redact(text)
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
