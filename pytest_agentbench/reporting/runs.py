"""Which run directory a report command means: a path, a run name, or `latest`.

Names are looked up in the output root: `--out DIR` if given, else the project's ini
`agentbench_out`, else `<project root>/reports/runs`, the project root being found from the cwd
the way pytest finds its rootdir (`paths/project.py`), so a command gives the same answer from
any subdirectory. `latest` is the `<out>/latest` link the plugin keeps on the newest run; when
there is no such link, the run directory whose run.json has the latest `started_at`.
"""

from __future__ import annotations

import difflib
import json
from datetime import datetime
from pathlib import Path

from pytest_agentbench.paths.project import find_project
from pytest_agentbench.reporting.names import ATTEMPTS_FILE, RUN_FILE, ReportError

LATEST = "latest"


def output_root(out: Path | None = None, start: Path | None = None) -> Path:
    """`out` if given (relative to the cwd), else the project's output root."""
    if out is not None:
        return out.expanduser().resolve()
    return find_project(start).out


def _is_run(path: Path) -> bool:
    return path.is_dir() and ((path / RUN_FILE).is_file() or (path / ATTEMPTS_FILE).is_file())


def _started(run: Path) -> tuple[float, float]:
    """Sort key: run.json's `started_at` (as a timestamp), then run.json's mtime."""
    meta = run / RUN_FILE
    mtime = meta.stat().st_mtime if meta.is_file() else (run / ATTEMPTS_FILE).stat().st_mtime
    try:
        text = json.loads(meta.read_text(encoding="utf-8")).get("started_at")
        return (datetime.fromisoformat(str(text)).timestamp(), mtime)
    except (OSError, ValueError, TypeError, AttributeError):
        return (mtime, mtime)


def newest_run(root: Path) -> Path | None:
    """The run directory under `root` that started last (by run.json), or None."""
    if not root.is_dir():
        return None
    runs = [p for p in root.iterdir()
            if p.name != LATEST and not p.name.startswith(".") and _is_run(p)]
    return max(runs, key=_started, default=None)


def resolve_run(spec: str | Path, out: Path | None = None, start: Path | None = None) -> Path:
    """The run directory `spec` names. Raises `ReportError` (one line) when there is none.

    `latest` always means the newest run of the output root. Otherwise an existing directory
    (relative to the cwd) is taken as given; a bare name is looked up in the output root.
    """
    text = str(spec)
    if text == LATEST:
        root = output_root(out, start)
        link = root / LATEST
        if _is_run(link):
            return link.resolve()
        found = newest_run(root)
        if found is None:
            raise ReportError(f"latest: no run found: neither {link} nor a run directory "
                              f"(with {RUN_FILE}) under {root}")
        return found
    given = Path(text).expanduser()
    if _is_run(given):
        return given
    if len(given.parts) == 1 and not given.is_absolute():
        root = output_root(out, start)
        if (root / text).is_dir():
            return root / text  # a run name wins over a directory of the cwd that is no run
        if given.is_dir():
            return given
        raise ReportError(f"{text}: no run directory {given.resolve()} nor a run named {text!r} "
                          f"in the output root {root}{_did_you_mean(text, root)}")
    if given.is_dir():
        return given
    raise ReportError(f"{text}: not a run directory")


def _did_you_mean(name: str, root: Path) -> str:
    """` (did you mean 'x'?)` for the closest run name under `root`, else the few there are."""
    try:
        names = sorted(p.name for p in root.iterdir()
                       if p.name != LATEST and not p.name.startswith(".") and _is_run(p))
    except OSError:
        return ""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    if names and len(names) <= 5:
        return f" (runs there: {', '.join(names)})"
    return f" ({len(names)} runs there; `latest` is the newest)" if names else ""
