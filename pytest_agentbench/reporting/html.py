"""One self-contained HTML file per run: summary with inline SVG plots, then per-task drill-down.

No network is needed to open it (inline CSS, JS and SVG; a CSP forbids any fetch). Drill-down
data (events from `events.jsonl`, `agent/tool_calls.jsonl`, `agent/conversation.jsonl`,
`diffs/*.patch`, `logs/*.txt`, and the context manifest and delegation graph some agents write,
see agent_artifacts.py, under each attempt's `artifact_paths.task_dir`) is embedded as
JSON and rendered by the script on first open. Every value is escaped: it is agent output.
Every embedded text also passes through a `Redactor` (the credential patterns by default; the
plugin passes the run's own, which knows each task's secrets): the artifacts of a run written
before redaction covered them must not leak through the report.
Missing artifacts are reported in the drill-down; paths escaping the run dir are ignored.
"""

from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

import pytest_agentbench.reporting.engine_report as engine_report
from pytest_agentbench.reporting.agent_artifacts import agent_artifacts
from pytest_agentbench.reporting.html_assets import CSS, JS
from pytest_agentbench.reporting.load import Run, load_events, load_run
from pytest_agentbench.reporting.summary import RunSummary, summarize

if TYPE_CHECKING:
    from pytest_agentbench.text.redaction import Redactor

HTML_FILE = "report.html"
MAX_TASKS = 1000
MAX_FILE_CHARS = 200_000
MAX_JSONL_ITEMS = 500
_BLAME_COLORS = {"agent": "#cf222e", "task": "#8c959f", "infra": "#bf8700"}
_EVENT_DETAIL = ("phase", "tool", "step", "ok", "exit_code", "error_type", "duration_ms",
                 "command", "passed", "failure_reason", "kind", "message", "path", "rule",
                 "model", "finish_reason", "status")


def write_html(run_dir: str | Path, out: str | Path | None = None,
               redactor: Redactor | None = None) -> Path:
    import pytest_agentbench.reporting.load as load

    if (Path(run_dir) / load.ATTEMPTS_FILE).exists():
        run = load_run(run_dir)
    else:  # interrupted before any attempt ended: a report that says so
        meta = load.read_meta(Path(run_dir) / load.RUN_FILE)
        run = Run(Path(run_dir), meta, load.records_to_frame([]), ("no attempt was recorded",))
    path = Path(out) if out else Path(run_dir) / HTML_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_html(run, summarize(run), redactor=redactor), encoding="utf-8")
    tmp.replace(path)
    return path


def render_html(run: Run, summary: RunSummary, max_tasks: int = MAX_TASKS,
                redactor: Redactor | None = None) -> str:
    from pytest_agentbench.text.redaction import Redactor

    d = summary.data
    tasks, rows = _tasks(run, max_tasks)
    tasks = (redactor or Redactor()).redact_obj(tasks)
    payload = json.dumps({"tasks": tasks}, separators=(",", ":"), allow_nan=False)
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    total = int(run.attempts["task_id"].nunique())
    more = (f'<p class="note">Showing the first {max_tasks} of {total} tasks.</p>'
            if total > max_tasks else "")
    return "".join([
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        '<link rel="icon" href="data:,">',
        f"<title>agentbench run {escape(run.run_id)}</title><style>{CSS}</style></head><body>",
        _header(d), engine_report.engines_html(d), _plots(run, d),
        "<h2>Tasks</h2>", more,
        '<div class="controls"><input id="task-filter" type="search" '
        'placeholder="filter tasks (id, suite, reason)" aria-label="filter tasks">'
        '<select id="task-status" aria-label="status"><option value="all">all</option>'
        '<option value="failed">failed</option><option value="passed">passed</option>'
        '<option value="excluded">excluded</option></select></div>',
        "<table id=\"tasks\"><thead><tr><th></th><th>task</th><th>suite</th><th>attempts</th>"
        "<th>passed</th><th>reasons</th></tr></thead><tbody>", rows, "</tbody></table>",
        f'<script type="application/json" id="ab-data">{payload}</script>',
        f"<script>{JS}</script></body></html>\n",
    ])


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:.1f}%"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _header(d: dict[str, Any]) -> str:
    run, c, pr = d["run"], d["counts"], d["pass_rate"]
    ci = (f"[{_pct(pr['ci_low'])}, {_pct(pr['ci_high'])}]" if pr["ci_low"] is not None else "—")
    usage, cats = d["usage"], c["tasks_by_category"]
    cards = [  # task counts beside task counts; attempts said as attempts
        ("pass rate", _pct(pr["rate"]),
         f"{pr['passed']}/{pr['scored']} scored attempts, Wilson 95% {ci}"),
        ("tasks", str(c["tasks"]), f"{c['attempts']} attempts · {cats.get('scored', 0)} scored"),
        ("invalid tasks", str(cats.get("invalid", 0)),
         f"{_n(c['invalid'], 'attempt')} · task at fault"),
        ("flaky tasks", str(cats.get("flaky", 0)), f"{_n(c['flaky'], 'attempt')} · baseline"),
        ("quarantined tasks", str(cats.get("quarantined", 0)),
         f"{_n(c['quarantined'], 'attempt')} · reported apart"),
        ("infra errors", str(c["infra_errors"]),
         "attempts, excluded" if d["rules"]["infra_errors"] == "excluded"
         else "attempts, counted as failures"),
        ("cost", f"${usage['cost_usd']:.2f}",
         f"{usage['total_tokens']:,} tokens; per pass "
         + ("—" if usage["cost_per_pass_usd"] is None else f"${usage['cost_per_pass_usd']:.4f}")),
    ]
    html = [f"<h1>Run {escape(str(run['run_id']))}</h1>",
            f'<p class="muted">variant <b>{escape(str(run["variant"]))}</b> · harness '
            f'{escape(str(run["harness_version"]))} · started {escape(str(run["started_at"]))}</p>',
            '<div class="cards">']
    html += [f'<div class="card"><span class="muted">{escape(k)}</span><b>{escape(v)}</b>'
             f'<span class="muted">{escape(sub)}</span></div>' for k, v, sub in cards]
    html.append("</div>")
    return "".join(html)


def _plots(run: Run, d: dict[str, Any]) -> str:
    rates = [("(all)", d["pass_rate"])] + [(s["suite"], s) for s in d["suites"]]
    scored = run.attempts[run.attempts["category"] == "scored"]
    return "".join([
        "<h2>Summary</h2><div class=\"plots\">",
        _figure("Pass rate with Wilson 95% interval", _rate_svg(rates)),
        _figure("Failure taxonomy (non-pass attempts)", _taxonomy_svg(d["taxonomy"]["by_reason"])),
        _figure("Duration of scored attempts (s)", _hist_svg(scored, "duration_sec")),
        _figure("Cost per scored attempt (USD)", _hist_svg(scored, "cost_usd")),
        "</div>",
    ])


def _figure(title: str, svg: str) -> str:
    return f'<div class="plot"><h3>{escape(title)}</h3>{svg}</div>'


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">'
            + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, anchor: str = "start", size: int = 11) -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="#1f2328">{escape(text)}</text>')


def _rate_svg(rows: list[tuple[str, dict[str, Any]]]) -> str:
    left, width, bar_h, gap = 130, 260, 16, 8
    height = 20 + len(rows) * (bar_h + gap)
    body = [f'<line x1="{left}" y1="4" x2="{left}" y2="{height - 14}" stroke="#999"/>']
    for pct in (0.0, 0.5, 1.0):
        x = left + pct * width
        body.append(_text(x, height - 2, f"{pct * 100:.0f}%", "middle", 10))
    for i, (name, r) in enumerate(rows):
        y = 6 + i * (bar_h + gap)
        body.append(_text(left - 6, y + 12, name[:20], "end"))
        if r.get("rate") is None:
            body.append(_text(left + 4, y + 12, "no scored attempts"))
            continue
        body.append(f'<rect x="{left}" y="{y}" width="{r["rate"] * width:.1f}" height="{bar_h}" '
                    f'fill="#54aeff"><title>{escape(name)}: {_pct(r["rate"])}</title></rect>')
        lo, hi = left + r["ci_low"] * width, left + r["ci_high"] * width
        mid = y + bar_h / 2
        body.append(f'<path d="M{lo:.1f} {mid - 5}v10M{lo:.1f} {mid}H{hi:.1f}M{hi:.1f} '
                    f'{mid - 5}v10" stroke="#1f2328" stroke-width="1.5" fill="none"/>')
        body.append(_text(left + width + 6, y + 12, f"{_pct(r['rate'])} (n={r['scored']})"))
    return _svg(left + width + 90, height, body, "pass rate by suite")


def _taxonomy_svg(by_reason: list[dict[str, Any]]) -> str:
    if not by_reason:
        return '<p class="note">No failures.</p>'
    left, width, bar_h, gap = 170, 220, 14, 6
    top = max(r["count"] for r in by_reason)
    height = 8 + len(by_reason) * (bar_h + gap)
    body = []
    for i, r in enumerate(by_reason):
        y = 4 + i * (bar_h + gap)
        w = width * r["count"] / top
        color = _BLAME_COLORS.get(str(r["blame"]), "#999")
        body.append(_text(left - 6, y + 11, str(r["reason"]), "end"))
        body.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}">'
                    f'<title>{escape(str(r["reason"]))} ({escape(str(r["blame"]))}): '
                    f'{r["count"]}</title></rect>')
        body.append(_text(left + w + 4, y + 11, f"{r['count']} · {r['blame']}"))
    return _svg(left + width + 90, height, body, "failure taxonomy")


def _hist_svg(frame: pd.DataFrame, column: str, bins: int = 20) -> str:
    values = frame[column].to_numpy(dtype=float)
    keep = ~np.isnan(values)
    values, passed = values[keep], frame["passed"].to_numpy()[keep]
    if len(values) == 0:
        return '<p class="note">No data.</p>'
    hi = float(values.max()) if values.max() > values.min() else float(values.min()) + 1.0
    edges = np.linspace(float(values.min()), hi, bins + 1)
    ok, _ = np.histogram(values[passed], edges)
    bad, _ = np.histogram(values[~passed], edges)
    width, height, base = 360, 150, 130
    top = max(int((ok + bad).max()), 1)
    step = width / bins
    body = [f'<line x1="0" y1="{base}" x2="{width}" y2="{base}" stroke="#999"/>']
    for i in range(bins):
        x = i * step
        h_ok, h_bad = (base - 10) * ok[i] / top, (base - 10) * bad[i] / top
        tip = f"{edges[i]:.4g}–{edges[i + 1]:.4g}: {ok[i]} passed, {bad[i]} failed"
        body.append(f'<g><title>{escape(tip)}</title>'
                    f'<rect x="{x + 1:.1f}" y="{base - h_ok:.1f}" width="{step - 2:.1f}" '
                    f'height="{h_ok:.1f}" fill="#1a7f37"/>'
                    f'<rect x="{x + 1:.1f}" y="{base - h_ok - h_bad:.1f}" width="{step - 2:.1f}" '
                    f'height="{h_bad:.1f}" fill="#cf222e"/></g>')
    body.append(_text(0, height - 4, f"{edges[0]:.4g}", "start", 10))
    body.append(_text(width, height - 4, f"{edges[-1]:.4g}", "end", 10))
    body.append(_text(width / 2, height - 4, "green passed · red failed", "middle", 10))
    return _svg(width, height, body, f"{column} histogram")


def _tasks(run: Run, max_tasks: int) -> tuple[list[dict[str, Any]], str]:
    df = run.attempts.sort_values(["task_id", "attempt_index"])
    task_ids = list(dict.fromkeys(df["task_id"]))[:max_tasks]
    df = df[df["task_id"].isin(task_ids)]
    events = load_events(run.path, df["attempt_id"])
    tasks, rows = [], []
    for i, (task_id, group) in enumerate(df.groupby("task_id", sort=True)):
        attempts = [_attempt(run.path, rec, events.get(rec["attempt_id"], []))
                    for rec in group.to_dict("records")]
        tasks.append({"task_id": task_id, "attempts": attempts})
        rows.append(_row(i, str(task_id), group))
    return tasks, "".join(rows)


def _row(i: int, task_id: str, group: pd.DataFrame) -> str:
    suite = str(group["suite"].iloc[0])
    scored = group[group["category"] == "scored"]
    reasons = sorted({str(r) for r in group["failure_reason"] if r is not None})
    passed = int(scored["passed"].sum())
    status = "excluded" if scored.empty else ("passed" if passed == len(scored) else "failed")
    cls = "pass" if status == "passed" else ("fail" if status == "failed" else "muted")
    shown = f"{passed}/{len(scored)}"
    if scored.empty:  # nothing scored: say why rather than "0/0"
        shown = ", ".join(sorted({str(c) for c in group["category"]} - {"scored"}))
    search = " ".join([task_id, suite, *reasons]).lower()
    return (f'<tr class="task" data-i="{i}" data-status="{status}" '
            f'data-search="{escape(search)}"><td><button class="open" type="button" '
            f'aria-expanded="false">open</button></td><td>{escape(task_id)}</td>'
            f'<td>{escape(suite)}</td><td>{len(group)}</td>'
            f'<td class="{cls}">{escape(shown)}</td><td>{escape(", ".join(reasons))}</td>'
            f'</tr><tr class="drill" hidden><td colspan="6"><div class="drill-body"></div>'
            f"</td></tr>")


def _num(x: Any) -> Any:
    if isinstance(x, np.generic):
        x = x.item()
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _attempt(run_dir: Path, rec: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any]:
    rel = rec["task_dir"] or f"tasks/{rec['task_id']}"
    task_dir = _inside(run_dir, rel)
    missing: list[str] = []
    never_ran = rec["failure_reason"] == "TASK_INVALID"  # its spec failed: no artifacts expected
    if not never_ran and (task_dir is None or not task_dir.is_dir()):
        missing.append(f"No artifact folder found ({rel}).")
    art = task_dir if task_dir is not None and task_dir.is_dir() else None
    return {
        "index": int(rec["attempt_index"]), "passed": bool(rec["passed"]),
        "reason": rec["failure_reason"], "category": str(rec["category"]),
        "duration": round(float(rec["duration_sec"]), 3), "steps": int(rec["steps"]),
        "tokens": int(rec["total_tokens"]), "cost": _num(rec["cost_usd"]),
        "summary": rec["summary"], "signature": " | ".join(rec["signature"] or []),
        "task_dir": rec["task_dir"], "missing": missing, "engine": rec["engine"],
        "retried": engine_report.try_lines(rec["retried"]),
        "events": [_event_row(e) for e in events],
        "tool_calls": _jsonl_items(art, "agent/tool_calls.jsonl", _tool_title),
        "conversation": _jsonl_items(art, "agent/conversation.jsonl", _message_title,
                                     _message_text),
        "diffs": _files(run_dir, art, "diffs", "*.patch"),
        "logs": _files(run_dir, art, "logs", "*.txt"),
        **agent_artifacts(run_dir, art),  # context manifest, delegation graph (None: absent)
    }


def _inside(root: Path, rel: str) -> Path | None:
    """`root / rel` if it stays inside `root` after resolving links, else None."""
    base = root.resolve()
    target = (base / rel).resolve()
    return target if target == base or base in target.parents else None


def _event_row(e: dict[str, Any]) -> list[Any]:
    detail = ", ".join(f"{k}={str(e[k])[:200]}" for k in _EVENT_DETAIL if e.get(k) is not None)
    return [e.get("seq"), e.get("mono_ms"), e.get("type"), e.get("actor"), detail]


def _read_text(path: Path) -> str:
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        text = fh.read(MAX_FILE_CHARS + 1)
    if len(text) > MAX_FILE_CHARS:
        text = text[:MAX_FILE_CHARS] + f"\n[... truncated at {MAX_FILE_CHARS} characters ...]"
    return text


def _files(run_dir: Path, art: Path | None, sub: str, pattern: str) -> list[dict[str, str]]:
    if art is None or not (art / sub).is_dir():
        return []
    out = []
    for path in sorted((art / sub).glob(pattern)):
        if path.is_file() and _inside(run_dir, str(path.relative_to(run_dir.resolve()))):
            out.append({"title": path.name, "text": _read_text(path)})
    return out


def _tool_title(n: int, item: Any) -> str:
    if isinstance(item, dict):
        name = item.get("tool") or item.get("name") or "call"
        step = item.get("step", n)
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


def _jsonl_items(art: Path | None, rel: str, title: Any,
                 body: Any = None) -> list[dict[str, str]]:
    path = art / rel if art is not None else None
    if path is None or not path.is_file():
        return []
    items: list[dict[str, str]] = []
    for n, line in enumerate(_read_text(path).splitlines(), 1):
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
