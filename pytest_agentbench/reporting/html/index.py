"""The index of all runs under an output root (`<root>/index.html`): variant, start, tasks,
attempts, pass rate with its Wilson interval, cost, and a link to each run's report.html.

Each run's figures come from its attempts.jsonl read with the "summary" field profile (the
cheapest parse that still gives the categories the pass rate needs) and are cached in
`<root>/.index_cache.json` by the file's size and mtime: the plugin rewrites the index at the
end of every run, and only the new run's attempts are read then. Written atomically (a rename):
two runs ending at once each write a whole index.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_agentbench.reporting.html.env import pct, relative_href, render, write_atomic
from pytest_agentbench.reporting.names import (
    ATTEMPTS_FILE,
    INDEX_FILE,
    RUN_FILE,
    ReportError,
    read_meta,
)

CACHE_FILE = ".index_cache.json"
CACHE_VERSION = 1


def _figures(run_dir: Path) -> dict[str, Any]:
    """Tasks, attempts, scored, passed, pass-rate interval and cost of one run."""
    import pytest_agentbench.reporting.stats as stats
    from pytest_agentbench.reporting.load import load_run
    from pytest_agentbench.reporting.summary import scored_mask

    df = load_run(run_dir, fields="summary").attempts
    scored = scored_mask(df)
    sdf = df[scored]
    passed = int(sdf["passed"].sum())
    row = stats.rate_row(passed, len(sdf))
    cost_known = int(df["cost_usd"].notna().sum())
    scored_cost = float(sdf["cost_usd"].sum(skipna=True))
    return {"tasks": int(df["task_id"].nunique()), "attempts": len(df), "scored": len(sdf),
            "passed": passed, "rate": row["rate"], "ci_low": row["ci_low"],
            "ci_high": row["ci_high"],
            "cost": float(df["cost_usd"].sum(skipna=True)) if cost_known else None,
            "per_pass": scored_cost / passed if passed and cost_known else None}


def _key(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _load_cache(root: Path) -> dict[str, Any]:
    try:
        data = json.loads((root / CACHE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return {}
    runs = data.get("runs")
    return runs if isinstance(runs, dict) else {}


def collect(root: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """One entry per run directory under `root` (newest first) and one line per run that
    could not be read."""

    cache = _load_cache(root)
    fresh: dict[str, Any] = {}
    entries: list[dict[str, Any]] = []
    problems: list[str] = []
    for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()
                    and not p.name.startswith(".")):
        attempts = d / ATTEMPTS_FILE
        if not (d / RUN_FILE).is_file() and not attempts.is_file():
            continue
        try:
            meta = read_meta(d / RUN_FILE)
            figs: dict[str, Any] | None = None
            if attempts.is_file():
                key = _key(attempts)
                hit = cache.get(d.name)
                if isinstance(hit, dict) and hit.get("key") == key:
                    figs = hit["figures"]
                else:
                    figs = _figures(d)
                fresh[d.name] = {"key": key, "figures": figs}
        except (ReportError, OSError, ValueError, KeyError) as exc:
            problems.append(f"{d.name}: not read ({' '.join(str(exc).split())[:200]})")
            continue
        entries.append({"dir": d, "name": d.name, "meta": meta, "figures": figs})
    _save_cache(root, fresh)
    entries.sort(key=lambda e: str(e["meta"].get("started_at") or ""), reverse=True)  # ISO
    return entries, problems


def _save_cache(root: Path, runs: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # a read-only root: no cache, the index still written
        write_atomic(root / CACHE_FILE, json.dumps({"version": CACHE_VERSION, "runs": runs}))


def render_index(root: Path, out: Path) -> str:
    entries, problems = collect(root)
    rows = []
    for e in entries:
        f, meta = e["figures"], e["meta"]
        page = e["dir"] / "report.html"
        row = {"name": e["name"], "variant": str(meta.get("variant") or "—"),
               "started": str(meta.get("started_at") or "—"),
               "href": relative_href(page, out), "missing": not page.is_file(),
               "tasks": "—", "attempts": "0", "rate": "—", "ci": "—", "cost": "—",
               "per_pass": "—"}
        if f is not None:
            row.update(tasks=str(f["tasks"]), attempts=str(f["attempts"]), rate=pct(f["rate"]),
                       ci=("—" if f["ci_low"] is None
                           else f"[{pct(f['ci_low'])}, {pct(f['ci_high'])}]"),
                       cost="—" if f["cost"] is None else f"${f['cost']:.2f}",
                       per_pass="—" if f["per_pass"] is None else f"${f['per_pass']:.4f}")
        rows.append(row)
    return render("index.html.j2", runs=rows, root=str(root), problems=problems)


def write_index(root: str | Path, out: str | Path | None = None) -> Path:
    """Write the index of the runs under `root` to `out` (default `<root>/index.html`)."""
    base = Path(root).expanduser().resolve()
    if not base.is_dir():
        raise ReportError(f"{base}: no such output root")
    path = Path(out).resolve() if out else base / INDEX_FILE
    # Two runs ending together: one at a time reads the runs and replaces the page, so the last
    # writer has seen every run the earlier one saw (and the figures cache is not torn).
    with _index_lock(base):
        return write_atomic(path, render_index(base, path))


@contextlib.contextmanager
def _index_lock(base: Path) -> Iterator[None]:
    try:
        handle = open(base / ".index.lock", "a+b")  # noqa: SIM115 - held for the block
    except OSError:  # a read-only root: nothing to write either, the write fails on its own
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


