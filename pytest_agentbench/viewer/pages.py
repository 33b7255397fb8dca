"""The pages: the viewer's own shells and the reporting package's pages rendered on request.

A shell holds no run data at all (a fixed title and the page's name): its script reads the query
string and fills the page from the JSON endpoints with textContent. The run, paired and compare
pages are reporting's renderers (render_html, render_paired_html, render_compare_html), called
with the same arguments `agentbench report` uses, as if written to the output root's top level,
so their relative links (`<run>/report.html#task-<id>`) reach the viewer's rendering of that run.

Content-Security-Policy: the shells may load only the viewer's own script, style sheet and JSON
(`'self'`, no inline code); reporting's pages carry their script and style inline, allowed by the
SHA-256 of exactly those two constants (html_assets.JS and CSS), so nothing else inline runs
even if a value escaped its escaping. Raw files are served as a sandboxed text document.
"""

from __future__ import annotations

import base64
import hashlib
import html
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from pytest_agentbench.viewer.data import Store

_COMMON = "base-uri 'none'; frame-ancestors 'none'"
VIEWER_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
              f"img-src 'self' data:; form-action 'self'; {_COMMON}")
RAW_CSP = f"sandbox; default-src 'none'; form-action 'none'; {_COMMON}"
SHELL_TITLES = {"index": "Runs", "run": "Run", "side": "Side by side", "search": "Search"}
VIEW_DIR = "_view"  # the pages' URL folder; reporting pages are rendered as if written here


def _sha(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


@lru_cache(maxsize=1)
def report_csp() -> str:
    from pytest_agentbench.reporting.html.assets import CSS, JS

    return (f"default-src 'none'; script-src 'sha256-{_sha(JS)}'; style-src 'sha256-{_sha(CSS)}'; "
            f"img-src data:; form-action 'none'; {_COMMON}")


@lru_cache(maxsize=4)
def static_file(name: str) -> bytes:
    """`viewer.js`, or `viewer.css` (reporting's style sheet, then the viewer's own rules)."""
    data = files("pytest_agentbench.viewer").joinpath("static", name).read_bytes()
    if name.endswith(".css"):
        from pytest_agentbench.reporting.html.assets import CSS

        data = CSS.encode("utf-8") + b"\n" + data
    return data


def shell(page: str, root: Path) -> str:
    """The HTML of one of the viewer's pages (SHELL_TITLES); the script fills it."""
    title = SHELL_TITLES[page]
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/_static/viewer.css">
<title>agentbench view · {title}</title>
<script src="/_static/viewer.js" defer></script>
</head>
<body data-page="{page}">
<nav class="top"><a href="/_view/">Runs</a><a href="/_view/search">Search</a>
<span class="root muted">{html.escape(str(root))}</span></nav>
<main id="main"></main>
</body>
</html>
"""


def error_page(title: str, message: str) -> str:
    """A page saying what went wrong, in one escaped line."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<link rel="stylesheet" href="/_static/viewer.css"><title>{html.escape(title)}</title></head>
<body><nav class="top"><a href="/_view/">Runs</a><a href="/_view/search">Search</a></nav>
<h1>{html.escape(title)}</h1><p class="err" id="error">{html.escape(message)}</p></body></html>
"""


def run_page(store: Store, name: str) -> str:
    """reporting's run page of `name`, rendered now (a run in progress included)."""
    import pytest_agentbench.reporting.load as load
    from pytest_agentbench.reporting.html.run_page import render_html
    from pytest_agentbench.reporting.summary import summarize

    path = store.run_path(name)

    def make() -> str:
        if (path / load.ATTEMPTS_FILE).is_file():
            run = load.load_run(path, cache=False)
        else:  # no attempt ended yet: the page that says so, as write_html makes it
            meta = load.read_meta(path / load.RUN_FILE)
            run = load.Run(path, meta, load.records_to_frame([]), ("no attempt was recorded",))
        return render_html(run, summarize(run), index_href=f"/{VIEW_DIR}/")

    return str(store.memo(("run-page", name), store.stamp(path), make))


def pairing_options(query: dict[str, list[str]]) -> dict[str, Any]:
    """The pairing options a page's query may set (the rest: `agentbench report`'s defaults)."""
    missing = (query.get("missing") or ["fail"])[-1]
    if missing not in ("fail", "skip"):
        raise ValueError(f"missing={missing!r}: expected fail or skip")
    return {"missing": missing, "infra_as_failure": (query.get("infra") or [""])[-1] == "failure",
            "allow_mismatch": [m for m in query.get("allow_mismatch", [])
                               if m in ("task_commit", "image", "limits", "harness_version")]}


def paired_page(store: Store, a: str, b: str, options: dict[str, Any]) -> str:
    from pytest_agentbench.reporting.html.pages import render_paired_html
    from pytest_agentbench.reporting.load import load_runs
    from pytest_agentbench.reporting.paired import compare

    run_a, run_b = load_runs([store.run_path(a), store.run_path(b)])
    report = compare(run_a, run_b, **options)
    return render_paired_html(report, store.root / VIEW_DIR / "paired.html")


def compare_page(store: Store, names: list[str], options: dict[str, Any]) -> str:
    from pytest_agentbench.reporting.compare import compare_runs
    from pytest_agentbench.reporting.html.pages import render_compare_html
    from pytest_agentbench.reporting.load import load_runs
    from pytest_agentbench.reporting.names import ReportError

    if len(names) < 2:
        raise ReportError("the compare page needs at least two runs (run=A&run=B...)")
    runs = load_runs([store.run_path(n) for n in names], fields="all")
    return render_compare_html(compare_runs(runs, 0, **options),
                               store.root / VIEW_DIR / "compare.html")
