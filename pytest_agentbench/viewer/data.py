"""The JSON the viewer's pages poll: the runs of the root, one run's attempts, one attempt.

Figures come from the reporting package (html_index.collect for each run's pass rate and cost,
load_run for the attempts, html._attempt for one attempt's tool calls, diffs, conversation and
events, the same drill-down data the run page embeds); a run is re-read only when its
`attempts.jsonl` or `run.json` changed (size, mtime), so polling a large root costs a few stats.
Everything that came from a run passes through a Redactor, as the run page does.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from pytest_agentbench.reporting.names import ATTEMPTS_FILE, RUN_FILE, ReportError
from pytest_agentbench.viewer import confine
from pytest_agentbench.viewer.live import EVENTS_DIR, LiveRuns

ROW_FIELDS = ("attempt_id", "task_id", "attempt_index", "suite", "passed", "failure_reason",
              "category", "duration_sec", "steps", "total_tokens", "cost_usd", "summary",
              "signature")
MAX_PART_BYTES = 32 * 1024 * 1024


class NotFound(Exception):
    """A run, task or attempt that is not in the root: the page says it (HTTP 404)."""


def plain(value: Any) -> Any:
    """`value` with numpy scalars made Python, non-finite floats None, tuples lists."""
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)


def plain_dict(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = plain(obj)
    return out


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


class Store:
    """Cached reads of one output root (thread-safe)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.live = LiveRuns()
        self._lock = threading.Lock()
        self._memo: dict[Hashable, tuple[Hashable, Any]] = {}

    def memo(self, key: Hashable, stamp: Hashable, make: Callable[[], Any]) -> Any:
        """`make()`, computed again only when `stamp` differs from the last call's."""
        with self._lock:
            hit = self._memo.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value = make()
        with self._lock:
            self._memo[key] = (stamp, value)
        return value

    def run_path(self, name: str) -> Path:
        path = confine.run_dir(self.root, name)
        if path is None:
            raise NotFound(f"no run named {name!r} in {self.root}")
        return path

    def stamp(self, run: Path) -> Hashable:
        return (_stamp(run / ATTEMPTS_FILE), _stamp(run / RUN_FILE))

    def frame(self, run: Path, fields: str = "all") -> Any:
        """The run's attempts frame (reporting.load), None before its first attempt."""
        from pytest_agentbench.reporting.load import load_run

        def make() -> Any:
            if not (run / ATTEMPTS_FILE).is_file():
                return None
            return load_run(run, fields=fields, cache=False).attempts  # type: ignore[arg-type]

        return self.memo(("frame", str(run), fields), self.stamp(run), make)

    # ------------------------------------------------------------------ the runs index

    def runs(self) -> dict[str, Any]:
        from pytest_agentbench.reporting.html.index import collect

        names = confine.run_names(self.root)
        stamp = tuple((n, self.stamp(self.root / n)) for n in names)
        entries, problems = self.memo("collect", stamp, lambda: collect(self.root))
        rows = []
        for entry in entries:
            if confine.run_dir(self.root, entry["name"]) is None:
                continue
            meta, figs = entry["meta"], entry["figures"]
            run = self.root / entry["name"]
            rows.append({"name": entry["name"], "variant": meta.get("variant"),
                         "started": meta.get("started_at"), "figures": figs,
                         "report": (run / "report.html").is_file(), **self._live(run)})
        return plain_dict({"root": str(self.root), "runs": rows, "problems": problems})

    def _live(self, run: Path) -> dict[str, Any]:
        """Whether the run is going, and its attempts that started and are not recorded yet."""
        status = self.live.status(run)
        if not status["live"]:
            return {"live": False, "idle_sec": None, "running": []}
        frame = self.frame(run)
        done = set() if frame is None else {str(a) for a in frame["attempt_id"]}
        running = [a for a in status["attempts"].values() if a["attempt_id"] not in done]
        running.sort(key=lambda a: (a["task_id"], a["index"] or 0))
        return {"live": True, "idle_sec": status["idle_sec"], "running": running}

    # ------------------------------------------------------------------ one run

    def run(self, name: str) -> dict[str, Any]:
        from pytest_agentbench.reporting.load import read_meta
        from pytest_agentbench.text.redaction import Redactor

        path = self.run_path(name)
        try:
            meta = read_meta(path / RUN_FILE) if (path / RUN_FILE).is_file() else {}
            frame = self.frame(path)
        except ReportError as exc:
            return plain_dict({"run": name, "error": " ".join(str(exc).split())[:300]})
        rows = [] if frame is None else [
            {k: rec.get(k) for k in ROW_FIELDS} for rec in frame.to_dict("records")]
        for row in rows:
            row["signature"] = " | ".join(row["signature"] or [])
        info = {k: meta.get(k) for k in ("variant", "started_at", "harness_version", "suites")}
        return plain_dict(Redactor().redact_obj({"run": name, **info, "attempts": rows,
                                            "report": (path / "report.html").is_file(),
                                            **self._live(path)}))

    # ------------------------------------------------------------------ one attempt

    def attempt(self, name: str, task_id: str, index: int) -> dict[str, Any]:
        """One attempt's drill-down data (reporting.html's), redacted."""
        from pytest_agentbench.reporting.html.run_page import _attempt
        from pytest_agentbench.reporting.load import load_events
        from pytest_agentbench.text.redaction import Redactor

        path = self.run_path(name)
        frame = self.frame(path, "all")
        if frame is None:
            raise NotFound(f"run {name!r} has no recorded attempt yet")
        picked = frame[(frame["task_id"] == task_id) & (frame["attempt_index"] == index)]
        if picked.empty:
            raise NotFound(f"no attempt {index} of task {task_id!r} in run {name!r}")
        rec = picked.to_dict("records")[-1]
        events = load_events(path, [rec["attempt_id"]]).get(rec["attempt_id"]) or \
            self._part_events(path, str(rec["attempt_id"]))
        data = _attempt(path, rec, events)
        tasks = sorted({str(t) for t in frame["task_id"]})
        return plain_dict(Redactor().redact_obj({"run": name, "task_id": task_id, "tasks": tasks,
                                            "indexes": sorted(int(i) for i in frame[
                                                frame["task_id"] == task_id]["attempt_index"]),
                                            "attempt": data}))

    def _part_events(self, run: Path, attempt_id: str) -> list[dict[str, Any]]:
        """The attempt's events from the workers' part files (a run still going)."""
        import json

        from pytest_agentbench.reporting.run_files import list_dir, open_dir, read_in

        folder = open_dir(run, EVENTS_DIR)
        if not isinstance(folder, int):
            return []
        found: list[dict[str, Any]] = []
        try:
            for part in (n for n in list_dir(folder) if n.endswith(".jsonl")):
                data = read_in(folder, part, MAX_PART_BYTES, f"{EVENTS_DIR}/{part}").data or b""
                for line in data.splitlines():
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(event, dict) and event.get("attempt_id") == attempt_id:
                        found.append(event)
        finally:
            os.close(folder)
        found.sort(key=lambda e: e["seq"] if isinstance(e.get("seq"), int) else 0)
        return found
