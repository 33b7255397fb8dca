"""Engines and infrastructure retries in the run summary.

An attempt whose engine was lost mid-try (SANDBOX_ERROR / ENGINE_LOST) may be run again on
another engine (`--agentbench-retry-infra N`). It keeps one record, its last try's, with the
earlier tries in `retried`; so it is one row of the frame and counts once, by its last try.
Here:
- `engine_figures`: the summary's `engines` (the engines used, one row per engine) and
  `infra_retries` (how many attempts were retried, where their tries were lost, and the pass
  rate with retried attempts, the main figure, and without them: only attempts that ran once);
- `engines_markdown` and `engines_html`: the sections of the markdown and HTML summaries, shown
  only when some attempt was retried, or when the run used more than one engine.
"""

from __future__ import annotations

from collections import Counter
from html import escape
from typing import Any

import numpy as np
import pandas as pd

import pytest_agentbench.reporting.stats as stats
from pytest_agentbench.reporting.md import interval, num, para, pct, table

NO_ENGINE = "(not recorded)"  # the local sandbox, an attempt that never ran, an older record
_OUTCOMES = ("passed", "failed", "infra_error", "excluded")


def engine_figures(df: pd.DataFrame, scored: pd.Series) -> dict[str, Any]:
    """`engines` and `infra_retries` of the summary document (see SCHEMA.md)."""
    scored_np = scored.to_numpy(dtype=bool)
    passed = df["passed"].to_numpy(dtype=bool) & scored_np
    infra = (df["category"] == "infra").to_numpy(dtype=bool)
    retried = df["infra_retries"].to_numpy() > 0
    lost: Counter[tuple[str, str]] = Counter()
    for tries in df["retried"].to_numpy(dtype=object)[retried]:
        for t in tries:
            reason = t.get("sub_reason") or t.get("failure_reason") or "?"
            lost[(str(t.get("engine") or ""), str(reason))] += 1
    final = np.select([passed, infra, scored_np], ["passed", "infra_error", "failed"], "excluded")
    outcomes = Counter(final[retried].tolist())
    once = scored_np & ~retried
    names = {str(e) for e in df["engine"].dropna().unique()} | {e for e, _ in lost}
    return {
        "engines": {"names": sorted(names), "by_engine": _by_engine(df, scored_np, passed, infra,
                                                                   lost)},
        "infra_retries": {
            "retried_attempts": int(retried.sum()),
            "earlier_tries": sum(lost.values()),
            "lost": [{"engine": e, "reason": r, "tries": n} for (e, r), n in sorted(lost.items())],
            "last_try": {k: outcomes.get(k, 0) for k in _OUTCOMES},
            "retried_scored": int((scored_np & retried).sum()),
            "pass_rate_with_retried": stats.rate_row(int(passed.sum()), int(scored_np.sum())),
            "pass_rate_without_retried": stats.rate_row(int((passed & ~retried).sum()),
                                                        int(once.sum())),
        },
    }


def _by_engine(df: pd.DataFrame, scored: np.ndarray, passed: np.ndarray, infra: np.ndarray,
               lost: Counter[tuple[str, str]]) -> list[dict[str, Any]]:
    """One row per engine the attempts' last tries ran on (and per engine only a lost try ran
    on), sorted by name; attempts with no engine recorded last, as engine None."""
    engine = df["engine"]
    work = pd.DataFrame({"key": engine.astype(object).where(engine.notna(), ""),
                         "scored": scored, "passed": passed, "infra": infra,
                         "duration": df["duration_sec"].to_numpy(dtype=float)})
    agg = work.groupby("key", sort=True).agg(
        attempts=("scored", "size"), scored=("scored", "sum"), passed=("passed", "sum"),
        infra=("infra", "sum"), median=("duration", "median"))
    lost_on: Counter[str] = Counter()
    for (name, _), n in lost.items():
        lost_on[name] += n
    keys = sorted(set(agg.index) - {""} | set(lost_on)) + ([""] if "" in agg.index else [])
    rows = []
    for key in keys:
        have = key in agg.index
        median = float(agg.at[key, "median"]) if have else float("nan")
        rows.append({
            "engine": key or None,
            "attempts": int(agg.at[key, "attempts"]) if have else 0,
            **stats.rate_row(int(agg.at[key, "passed"]) if have else 0,
                             int(agg.at[key, "scored"]) if have else 0),
            "infra_errors": int(agg.at[key, "infra"]) if have else 0,
            "tries_lost": lost_on.get(key, 0),
            "median_duration_sec": None if np.isnan(median) else median,
        })
    return rows


def shown(data: dict[str, Any]) -> tuple[bool, bool]:
    """(retries section, engine table): each only when it has something to say."""
    retries = data.get("infra_retries") or {}
    engines = data.get("engines") or {}
    return bool(retries.get("retried_attempts")), len(engines.get("names", [])) > 1


def _plural(n: int, noun: str, nouns: str | None = None) -> str:
    return f"{n} {noun if n == 1 else (nouns or noun + 's')}"


def retry_sentences(r: dict[str, Any]) -> tuple[str, str]:
    """The two sentences of the retries section, plain text (escape before use)."""
    where = ", ".join(f"{x['tries']} on engine {x['engine']} ({x['reason']})" for x in r["lost"])
    last, n = r["last_try"], r["retried_attempts"]
    first = (f"{_plural(n, 'attempt')} {'was' if n == 1 else 'were'} retried after an "
             f"infrastructure error ({_plural(r['earlier_tries'], 'earlier try', 'earlier tries')}"
             f" set aside: {where}). "
             f"Each attempt counts once, by its last try: {last['passed']} passed, "
             f"{last['failed']} failed, {last['infra_error']} infra error, "
             f"{last['excluded']} excluded.")
    w, wo = r["pass_rate_with_retried"], r["pass_rate_without_retried"]
    second = (f"pass rate {pct(w['rate'])} {interval(w)} with retried attempts "
              f"({w['passed']}/{w['scored']} scored); {pct(wo['rate'])} {interval(wo)} without "
              f"them ({wo['passed']}/{wo['scored']} scored; "
              f"{_plural(r['retried_scored'], 'retried attempt')} left out).")
    return first, second


ENGINE_HEADERS = ["engine", "attempts", "scored", "passed", "pass rate", "95% CI",
                  "infra errors", "tries lost", "median wall time (s)"]


def _engine_rows(data: dict[str, Any]) -> list[list[Any]]:
    return [[e["engine"] or NO_ENGINE, e["attempts"], e["scored"], e["passed"], pct(e["rate"]),
             interval(e), e["infra_errors"], e["tries_lost"], num(e["median_duration_sec"])]
            for e in data["engines"]["by_engine"]]


def engines_markdown(data: dict[str, Any]) -> list[str]:
    """Markdown lines of the summary's engine and retry sections (none for a run on one engine
    without retries)."""
    retries, engines = shown(data)
    out: list[str] = []
    if retries:
        first, second = retry_sentences(data["infra_retries"])
        out += ["## Infrastructure retries", "", para(first), "", para(second[0].upper()
                                                                      + second[1:]), ""]
    if engines:
        out += ["## Engines", "",
                "Attempts by the engine their last try ran on; tries lost: earlier tries set "
                "aside there.", "", table(ENGINE_HEADERS, _engine_rows(data), None), ""]
    return out


def engines_html(data: dict[str, Any]) -> str:
    """The same sections for report.html, every value escaped."""
    retries, engines = shown(data)
    html: list[str] = []
    if retries:
        first, second = retry_sentences(data["infra_retries"])
        html += ["<h2>Infrastructure retries</h2>", f"<p>{escape(first)}</p>",
                 f"<p>{escape(second[0].upper() + second[1:])}</p>"]
    if engines:
        head = "".join(f"<th>{escape(h)}</th>" for h in ENGINE_HEADERS)
        body = "".join("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in row) + "</tr>"
                       for row in _engine_rows(data))
        html += ["<h2>Engines</h2>", f'<table id="engines"><thead><tr>{head}</tr></thead>'
                 f"<tbody>{body}</tbody></table>"]
    return "".join(html)


def try_lines(tries: tuple[dict[str, Any], ...]) -> str:
    """The earlier tries of one attempt, for the HTML drill-down ('' when it ran once)."""
    return "; ".join(
        f"try {i}: {t.get('failure_reason')}"
        + (f"/{t['sub_reason']}" if t.get("sub_reason") else "")
        + f" on {t.get('engine')} ({float(t.get('duration_sec') or 0.0):.1f} s"
        + (f", artifacts {t['artifacts_dir']}" if t.get("artifacts_dir") else "") + ")"
        for i, t in enumerate(tries, 1))
