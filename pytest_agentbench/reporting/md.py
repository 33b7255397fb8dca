"""Markdown primitives of the reports: escaped cells and paragraphs, percentages, tables.

Everything from the records (task ids, signatures, reasons, engine names) is untrusted agent or
task output: cells are escaped so that it cannot break a table or inject HTML.
"""

from __future__ import annotations

import math
from typing import Any

MD_ROWS = 30


def cell(value: Any) -> str:
    """One escaped markdown table cell."""
    if value is None:
        return "—"
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("|", "\\|").replace("`", "\\`").replace("\r", " ").replace("\n", " ")
    return text if len(text) <= 200 else text[:197] + "..."


def para(value: Any) -> str:
    """Escaped markdown paragraph text (no truncation)."""
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("`", "\\`")


def pct(value: float | None) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else f"{value * 100:.1f}%"


def num(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


EMPTY = "_none_"  # what a table with no rows says (a header row alone reads as a broken table)


def table(headers: list[str], rows: list[list[Any]], limit: int | None = MD_ROWS) -> str:
    if not rows:
        return EMPTY
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    shown = rows if limit is None else rows[:limit]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in shown]
    if limit is not None and len(rows) > limit:
        lines.append(f"\n_{len(rows) - limit} more row(s) in the JSON form._")
    return "\n".join(lines)


def interval(row: dict[str, Any]) -> str:
    if row.get("ci_low") is None:
        return "—"
    return f"[{pct(row['ci_low'])}, {pct(row['ci_high'])}]"
