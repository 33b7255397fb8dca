"""The Jinja2 environment shared by every HTML page (run, paired, compare, index).

Autoescaping is on for every template: values from a run (task ids, variant names, summaries)
are agent or user text and reach the page escaped. Markup made in Python is never passed in;
charts are geometry (numbers and labels, see svg.py) that the `svg.html.j2` macro draws.
The drill-down data goes in as JSON inside `<script type="application/json">`, with `<`, `>`
and `&` written as \\u escapes so no value can close the script element.
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from pytest_agentbench.reporting.html.assets import CSS


def pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{x * 100:.{digits}f}%"


def usd(x: float | None, digits: int = 4) -> str:
    return "—" if x is None else f"${x:.{digits}f}"


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(loader=PackageLoader("pytest_agentbench.reporting.html", "templates"),
                      autoescape=True, trim_blocks=True, lstrip_blocks=True,
                      undefined=StrictUndefined, auto_reload=False)
    env.filters["pct"] = pct
    env.filters["usd"] = usd
    env.globals["css"] = Markup(CSS)  # a constant of this package, not run data
    return env


def json_payload(obj: Any) -> Markup:
    """`obj` as JSON safe inside a <script> element (no `<`, `>` or `&` left)."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)  # noqa: S704 - escaped above for the script context


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def write_atomic(path: Path, text: str) -> Path:
    """Write `path` through a temporary file in its directory and a rename: a reader (or a
    second writer ending at the same moment) sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def relative_href(target: Path, page: Path) -> str:
    """The link from the page written at `page` to the file `target` (both made absolute),
    percent-encoded per path segment."""
    from urllib.parse import quote

    rel = os.path.relpath(Path(target).resolve(), Path(page).resolve().parent)
    return "/".join(quote(part) for part in Path(rel).parts)


def task_anchor(task_id: str) -> str:
    """The fragment id of a task's row on its run page (`task-` + the id, any character kept:
    the browser matches ids literally, and links percent-encode it)."""
    return f"task-{task_id}"


def task_href(run_page: str, task_id: str) -> str:
    from urllib.parse import quote

    return f"{run_page}#{quote(task_anchor(task_id), safe='')}"
