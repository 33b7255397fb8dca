"""One self-contained HTML file per run: summary with inline SVG plots, then per-task drill-down.

No network is needed to open it (inline CSS, JS and SVG; a CSP forbids any fetch). Drill-down
data (events from `events.jsonl`, `agent/tool_calls.jsonl`, `agent/conversation.jsonl`,
`diffs/*.patch`, `logs/*.txt`, and the context manifest and delegation graph some agents write,
see agent_artifacts.py, under each attempt's `artifact_paths.task_dir`) is embedded as
JSON and rendered by the script on first open. Every value is escaped: it is agent output.
The page is the Jinja2 template `templates/run.html.j2` (autoescaped, see env.py); charts
are geometry from svg.py. Each task row has the id `task-<task id>`: a link to
`report.html#task-<id>` (the paired page's) opens its drill-down.
Every embedded text also passes through a `Redactor` (the credential patterns by default; the
plugin passes the run's own, which knows each task's secrets): the artifacts of a run written
before redaction covered them must not leak through the report.
Missing artifacts are reported in the drill-down. A run directory is data from elsewhere: its
files are read without following any link, regular files only, capped (run_files.py); one that
is not is shown as the line saying why.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from markupsafe import Markup

import pytest_agentbench.reporting.engine_report as engine_report
import pytest_agentbench.reporting.html.svg as html_svg
from pytest_agentbench.reporting.agent_artifacts import agent_artifacts
from pytest_agentbench.reporting.html.assets import JS
from pytest_agentbench.reporting.html.env import (
    json_payload,
    pct,
    render,
    task_anchor,
    write_atomic,
)
from pytest_agentbench.reporting.html.timeline import StepNumbers, spans, step_numbers
from pytest_agentbench.reporting.load import Run, load_events, load_run
from pytest_agentbench.reporting.names import INDEX_FILE
from pytest_agentbench.reporting.run_files import (
    RunFile,
    list_dir,
    open_dir,
    read_in,
    read_run_file,
)
from pytest_agentbench.reporting.summary import RunSummary, summarize
from pytest_agentbench.reporting.validations import task_adequacy
from pytest_agentbench.schemas.taxonomy import FLAKY_REASONS

if TYPE_CHECKING:
    from pytest_agentbench.text.redaction import Redactor

HTML_FILE = "report.html"
MAX_TASKS = 1000
MAX_FILE_CHARS = 200_000
MAX_FILE_BYTES = 4 * MAX_FILE_CHARS  # read at most this much of a file (UTF-8: 4 bytes a char)
MAX_JSONL_ITEMS = 500
_EVENT_DETAIL = ("phase", "tool", "step", "ok", "exit_code", "error_type", "duration_ms",
                 "command", "passed", "failure_reason", "kind", "message", "path", "rule",
                 "model", "finish_reason", "status")


def write_html(run_dir: str | Path, out: str | Path | None = None,
               redactor: Redactor | None = None, link_index: bool = False) -> Path:
    """`<run_dir>/report.html` (or `out`). It links to the output root's index.html when that
    exists, or when `link_index` says it is about to (the plugin writes the index next: after
    this page, so the index never lists the run without its page)."""
    import pytest_agentbench.reporting.load as load

    if (Path(run_dir) / load.ATTEMPTS_FILE).exists():
        run = load_run(run_dir)
    else:  # interrupted before any attempt ended: a report that says so
        meta = load.read_meta(Path(run_dir) / load.RUN_FILE)
        run = Run(Path(run_dir), meta, load.records_to_frame([]), ("no attempt was recorded",))
    path = Path(out) if out else Path(run_dir) / HTML_FILE
    index = Path(run_dir).resolve().parent / INDEX_FILE  # the output root's list of runs
    href = f"../{INDEX_FILE}" if out is None and (link_index or index.is_file()) else None
    return write_atomic(path, render_html(run, summarize(run), redactor=redactor,
                                          index_href=href))


def render_html(run: Run, summary: RunSummary, max_tasks: int = MAX_TASKS,
                redactor: Redactor | None = None, index_href: str | None = None) -> str:
    from pytest_agentbench.text.redaction import Redactor

    d = summary.data
    tasks, rows = _tasks(run, max_tasks)
    adequacy_notes = task_adequacy(run, rows)
    tasks = (redactor or Redactor()).redact_obj(tasks)
    total = int(run.attempts["task_id"].nunique())
    info = d["run"]
    cards, notes = run_cards(run, d)
    return render(
        "run.html.j2", run_id=str(run.run_id), variant=str(info["variant"]),
        harness=str(info["harness_version"]), started=str(info["started_at"]),
        cards=cards, notes=notes,
        engines=Markup(engine_report.engines_html(d)),  # noqa: S704 - escaped there
        figures=_figures(run, d), rows=rows, more=total > max_tasks, max_tasks=max_tasks,
        adequacy_shown=any(r["adequacy_view"] is not None for r in rows),
        adequacy_notes=adequacy_notes,
        total=total, payload=json_payload({"tasks": tasks}),
        js=Markup(JS),  # noqa: S704 - this package's constant
        index_href=index_href)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _figures(run: Run, d: dict[str, Any]) -> list[dict[str, Any]]:
    rates = [("(all)", d["pass_rate"])] + [(s["suite"], s) for s in d["suites"]]
    scored = run.attempts[run.attempts["category"] == "scored"]
    passed = scored["passed"].to_numpy(dtype=bool)
    by_reason = d["taxonomy"]["by_reason"]
    figs: list[dict[str, Any]] = [
        {"title": "Pass rate with Wilson 95% interval", "chart": html_svg.rate_chart(rates),
         "note": ""},
        {"title": "Failure taxonomy (non-pass attempts)",
         "chart": html_svg.taxonomy_chart(by_reason), "note": "" if by_reason else "No failures."},
    ]
    dur = html_svg.histogram(scored["duration_sec"].to_numpy(dtype=float), passed, "seconds")
    figs.append({"title": "Duration of scored attempts", "chart": dur,
                 "note": "" if dur else "No scored attempts."})
    why = cost_absent(d)
    cost = None if why else html_svg.histogram(scored["cost_usd"].to_numpy(dtype=float), passed,
                                               "USD")
    if cost is not None:
        figs.append({"title": "Cost per scored attempt", "chart": cost, "note": ""})
    elif why:
        figs.append({"title": "Cost per scored attempt", "chart": None, "note": why,
                     "id": "cost-absent"})
    rows = d.get("pass_at_k") or []
    curve = html_svg.pass_at_k_chart(rows)
    if curve is not None:
        has_hat = any(r.get("pass_hat_k") is not None for r in rows)
        figs.append({"title": "pass@k" + (" and pass^k" if has_hat else "") + " by k",
                     "chart": curve, "id": "pass-at-k", "note": (
                         "pass@k: a task counts when at least one of k attempts passes "
                         "(unbiased estimator); " + ("pass^k: only when all k pass. "
                                                     if has_hat else "")
                         + "Over the tasks with at least k scored attempts.")})
    return figs


def cost_absent(d: dict[str, Any]) -> str:
    """Why the cost histogram is not drawn ('' when it is): no model call, or no price."""
    usage = d["usage"]
    if d["counts"]["scored"] == 0:
        return "No scored attempts."
    if usage["total_tokens"] == 0 and not usage["cost_usd"]:
        return ("No model calls in this run: no tokens and no cost were recorded "
                "(an agent that calls no model, such as the oracle).")
    if usage["cost_known_attempts"] == 0:
        return (f"No cost recorded: {usage['total_tokens']:,} tokens were used, but the "
                "model's price is unknown.")
    return ""


def run_cards(run: Run, d: dict[str, Any]) -> tuple[list[dict[str, str]], list[str]]:
    """The summary cards (task counts beside task counts; attempts said as attempts) and the
    notes that explain them: an attempt both quarantined and flaky counts as quarantined."""
    c, pr, usage = d["counts"], d["pass_rate"], d["usage"]
    cats = c["tasks_by_category"]
    ci = f"[{pct(pr['ci_low'])}, {pct(pr['ci_high'])}]" if pr["ci_low"] is not None else "—"
    df = run.attempts
    hidden = df[(df["category"] == "quarantined")
                & df["failure_reason"].isin([str(r.value) for r in FLAKY_REASONS])]
    hidden_tasks = int(hidden["task_id"].nunique())
    per_pass = usage["cost_per_pass_usd"]
    per_pass_ci = usage.get("cost_per_pass") or {}
    clustered = d.get("pass_rate_clustered")
    rate_sub = f"{pr['passed']}/{pr['scored']} scored attempts, Wilson 95% {ci}"
    rate_note = ""
    if clustered:  # several attempts per task: they are not independent, the headline is this
        rate_sub = (f"{pr['passed']}/{pr['scored']} scored attempts on {clustered['tasks']} "
                    f"tasks, clustered by task 95% [{pct(clustered['ci_low'])}, "
                    f"{pct(clustered['ci_high'])}]")
        rate_note = (f"Attempts of one task are not independent: the interval is clustered by "
                     f"task ({clustered['method']}); per attempt (Wilson) it would be {ci}.")
    cost_sub = f"{usage['total_tokens']:,} tokens; per pass " + (
        "—" if per_pass is None else f"${per_pass:.4f}")
    cost_note = ""
    if per_pass is not None and per_pass_ci.get("ci_low") is not None:
        high = per_pass_ci.get("ci_high")
        cost_sub += (f" [${per_pass_ci['ci_low']:.4f}, "
                     + ("unbounded" if high is None else f"${high:.4f}") + "]")
        if high is None:
            cost_note = UNBOUNDED_NOTE
    cards = [
        {"key": "pass-rate", "label": "pass rate", "value": pct(pr["rate"]),
         "sub": rate_sub, "note": rate_note},
        {"key": "tasks", "label": "tasks", "value": str(c["tasks"]),
         "sub": f"{c['attempts']} attempts · {cats.get('scored', 0)} with scored attempts",
         "note": ""},
        {"key": "invalid", "label": "invalid tasks", "value": str(cats.get("invalid", 0)),
         "sub": f"{_n(c['invalid'], 'attempt')} · task at fault", "note": ""},
        {"key": "flaky", "label": "flaky tasks", "value": str(cats.get("flaky", 0)),
         "sub": f"{_n(c['flaky'], 'attempt')} · flaky baseline or verifier",
         "note": (f"+ {_n(hidden_tasks, 'quarantined task')} with a flaky baseline, counted "
                  "as quarantined" if hidden_tasks else "")},
        {"key": "quarantined", "label": "quarantined tasks",
         "value": str(cats.get("quarantined", 0)),
         "sub": f"{_n(c['quarantined'], 'attempt')} · reported apart", "note": ""},
        {"key": "infra", "label": "infra errors", "value": str(c["infra_errors"]),
         "sub": ("attempts, excluded" if d["rules"]["infra_errors"] == "excluded"
                 else "attempts, counted as failures"), "note": ""},
        {"key": "cost", "label": "cost", "value": f"${usage['cost_usd']:.2f}",
         "sub": cost_sub, "note": cost_note},
    ]
    if usage["total_tokens"] == 0 and not usage["cost_usd"]:  # the oracle, nop: no model
        cards[-1].update(value="—", sub="no model calls: no tokens, no cost")
    notes = []
    if hidden_tasks:
        reasons = ", ".join(sorted({str(r) for r in hidden["failure_reason"]}))
        notes.append(f"The failure taxonomy shows {_n(len(hidden), 'attempt')} as {reasons} on "
                     f"{_n(hidden_tasks, 'task')} the suite quarantines: quarantine takes "
                     "precedence, so the cards count them as quarantined, not flaky. Neither "
                     "is scored.")
    return cards, notes


_NOT_SCORED = {"invalid": "task invalid", "flaky": "flaky baseline or verifier",
               "quarantined": "quarantined", "infra": "infrastructure error"}


def _why_not_scored(rec: dict[str, Any]) -> str:
    reason = str(rec["failure_reason"] or "")
    if reason in ("BASELINE_FLAKY", "VERIFIER_FLAKY"):
        return reason.split("_")[0].lower() + " flaky"
    return _NOT_SCORED.get(str(rec["category"]), str(rec["category"]))


def _tasks(run: Run, max_tasks: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The drill-down data and the table row of each of the first `max_tasks` tasks. The frame
    is turned into records once (a `to_dict` per task group cost 15 s at 1000 tasks)."""
    df = run.attempts.sort_values(["task_id", "attempt_index"], kind="stable")
    task_ids = list(dict.fromkeys(df["task_id"]))[:max_tasks]
    df = df[df["task_id"].isin(task_ids)]
    events = load_events(run.path, df["attempt_id"])
    groups: dict[str, list[dict[str, Any]]] = {}
    for rec in df.to_dict("records"):
        groups.setdefault(str(rec["task_id"]), []).append(rec)
    tasks, rows = [], []
    for task_id in sorted(groups):
        recs = groups[task_id]
        attempts = [_attempt(run.path, rec, events.get(rec["attempt_id"], [])) for rec in recs]
        tasks.append({"task_id": task_id, "attempts": attempts})
        rows.append(_row(task_id, recs))
    return tasks, rows


def _row(task_id: str, recs: list[dict[str, Any]]) -> dict[str, Any]:
    suite = str(recs[0]["suite"])
    scored = [r for r in recs if r["category"] == "scored"]
    reasons = sorted({str(r["failure_reason"]) for r in recs if r["failure_reason"] is not None})
    passed = sum(1 for r in scored if r["passed"])
    status = "excluded" if not scored else ("passed" if passed == len(scored) else "failed")
    cls = "pass" if status == "passed" else ("fail" if status == "failed" else "muted")
    shown = f"{passed}/{len(scored)}"
    if not scored:  # nothing scored: say why rather than "0/0"
        why = sorted({_why_not_scored(r) for r in recs})
        shown = "not scored: " + ", ".join(why)
    return {"task_id": task_id, "anchor": task_anchor(task_id), "status": status, "cls": cls,
            "suite": suite, "attempts": len(recs), "shown": shown,
            "reasons": ", ".join(reasons), "task_dir": str(recs[0]["task_dir"] or ""),
            "task_commit": str(recs[0].get("task_commit") or ""),
            "search": " ".join([task_id, suite, *reasons]).lower()}


def _num(x: Any) -> Any:
    if isinstance(x, np.generic):
        x = x.item()
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _attempt(run_dir: Path, rec: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any]:
    rel = rec["task_dir"] or f"tasks/{rec['task_id']}"
    folder = open_dir(run_dir, rel)  # no link followed, the folder's own path included
    missing: list[str] = []
    never_ran = rec["failure_reason"] == "TASK_INVALID"  # its spec failed: no artifacts expected
    art: str | None = None
    if isinstance(folder, int):
        os.close(folder)
        art = rel
    elif not never_ran:
        missing.append(f"No artifact folder found ({rel})." if folder.missing
                       else f"Artifact folder {folder.note}.")
    return {
        "index": int(rec["attempt_index"]), "passed": bool(rec["passed"]),
        "reason": rec["failure_reason"], "category": str(rec["category"]),
        "duration": round(float(rec["duration_sec"]), 3), "steps": int(rec["steps"]),
        "tokens": int(rec["total_tokens"]), "cost": _num(rec["cost_usd"]),
        "summary": rec["summary"], "signature": " | ".join(rec["signature"] or []),
        "task_dir": rec["task_dir"], "missing": missing, "engine": rec["engine"],
        "retried": engine_report.try_lines(rec["retried"]),
        "events": [_event_row(e) for e in events], "spans": spans(events),
        "tool_calls": _jsonl_items(run_dir, art, "agent/tool_calls.jsonl",
                                   partial(_tool_title, numbers=step_numbers(events))),
        "conversation": _jsonl_items(run_dir, art, "agent/conversation.jsonl", _message_title,
                                     _message_text),
        "diffs": _files(run_dir, art, "diffs", "*.patch"),
        "logs": _files(run_dir, art, "logs", "*.txt"),
        **agent_artifacts(run_dir, art),  # context manifest, delegation graph (None: absent)
    }


def _event_row(e: dict[str, Any]) -> list[Any]:
    detail = ", ".join(f"{k}={str(e[k])[:200]}" for k in _EVENT_DETAIL if e.get(k) is not None)
    return [e.get("seq"), e.get("mono_ms"), e.get("type"), e.get("actor"), detail]


def _text(found: RunFile) -> str:
    """The file's first MAX_FILE_CHARS characters, or the line saying why it is not shown."""
    if found.data is None:
        return f"[{found.note}]"
    text = found.data.decode("utf-8", "replace")
    if found.cut or len(text) > MAX_FILE_CHARS:
        text = text[:MAX_FILE_CHARS] + f"\n[... truncated at {MAX_FILE_CHARS} characters ...]"
    return text


def _files(run_dir: Path, art: str | None, sub: str, pattern: str) -> list[dict[str, str]]:
    """Each `pattern` file of the attempt's folder `sub`; a link or a FIFO is listed with the
    reason it is not shown, never opened."""
    folder = open_dir(run_dir, f"{art}/{sub}") if art is not None else RunFile(missing=True)
    if isinstance(folder, RunFile):
        return [] if folder.missing else [{"title": sub, "text": f"[{folder.note}]"}]
    try:
        return [{"title": name, "text": _text(read_in(folder, name, MAX_FILE_BYTES,
                                                      f"{art}/{sub}/{name}"))}
                for name in list_dir(folder) if fnmatch.fnmatchcase(name, pattern)]
    finally:
        os.close(folder)


UNBOUNDED_NOTE = ("Unbounded: in more than 2.5% of the bootstrap resamples of tasks no task "
                  "passed, so the cost per pass has no finite upper 95% limit; more passing "
                  "tasks narrow it.")


def _tool_title(n: int, item: Any, numbers: StepNumbers | None = None) -> str:
    """`step N: tool`, N on the page's one counter of model requests and tool calls."""
    if isinstance(item, dict):
        name = item.get("tool") or item.get("name") or "call"
        step = (numbers or {}).get(("tool", item.get("step", n)), item.get("step", n))
        ok = item.get("ok")
        return f"step {step}: {name}" + ("" if ok is None else (" · ok" if ok else " · error"))
    return f"#{n}"


def _message_title(n: int, item: Any) -> str:
    role = item.get("role", "message") if isinstance(item, dict) else "message"
    return f"#{n} {role}"


def _message_text(item: Any, line: str) -> str:
    if isinstance(item, dict) and isinstance(item.get("content"), str):
        rest = {k: v for k, v in item.items() if k not in ("role", "content")}
        extra = "\n\n" + json.dumps(rest, indent=2, ensure_ascii=False) if rest else ""
        return str(item["content"]) + extra
    return json.dumps(item, indent=2, ensure_ascii=False) if item is not None else line


def _jsonl_items(run_dir: Path, art: str | None, rel: str, title: Any,
                 body: Any = None) -> list[dict[str, str]]:
    found = read_run_file(run_dir, f"{art}/{rel}", MAX_FILE_BYTES) if art else RunFile(
        missing=True)
    if found.missing:
        return []
    if found.data is None:
        return [{"title": rel, "text": f"[{found.note}]"}]
    items: list[dict[str, str]] = []
    for n, line in enumerate(_text(found).splitlines(), 1):
        if not line.strip():
            continue
        if len(items) >= MAX_JSONL_ITEMS:
            items.append({"title": "…", "text": f"more than {MAX_JSONL_ITEMS} entries; cut"})
            break
        try:
            obj = json.loads(line)
            text = json.dumps(obj, indent=2, ensure_ascii=False)
        except ValueError:
            obj, text = None, line
        if body is not None:
            text = body(obj, line)
        items.append({"title": title(n, obj), "text": text})
    return items
