"""Reports over run directories: summary, paired comparison, regression gate, HTML viewer.

Public API (see SCHEMA.md for the stable JSON and CSV forms):
- `load_run(dir)`, `load_runs(dirs)` -> `Run`; `ReportError` for bad input;
- `summarize(run)` -> `RunSummary`; `write_summary(run_dir)` -> path of `report_summary.md`;
- `compare(run_a, run_b, ...)` -> `PairedReport`; `PairingError` when runs cannot be paired;
- `compare_runs([run, ...], baseline=0, ...)` -> `CompareReport` (N runs side by side, each
  paired against the baseline); `render_compare(report, fmt)`;
- `gate(baseline, candidate, ...)` -> `GateResult` (`.exit_code`: 1 regression, 3 inconclusive
  (0 with `inconclusive_ok`), else 0; `.outcome`);
- `render_summary`, `render_paired`, `render_gate` (md, csv, json); `render_html`, `write_html`;
- `add_report_commands(subparsers)` for the `agentbench` console script.

Imports are lazy so that `import pytest_agentbench.reporting` stays cheap (no pandas).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ReportError": "load", "Run": "load", "load_run": "load", "load_runs": "load",
    "RunSummary": "summary", "summarize": "summary", "write_summary": "summary",
    "PairedReport": "paired", "PairingError": "paired", "compare": "paired",
    "GateResult": "gate", "gate": "gate",
    "CompareReport": "compare", "compare_runs": "compare", "render_compare": "compare_render",
    "render_summary": "render", "render_paired": "render", "render_gate": "render",
    "render_html": "html.run_page", "write_html": "html.run_page",
    "add_report_commands": "cli",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
