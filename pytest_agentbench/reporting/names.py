"""What a run directory's files are called, the report error, and the field profiles: the
light part of reporting, which the CLI imports before it knows a report is wanted (load.py
brings pandas, about 1.4 s)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

ATTEMPTS_FILE = "attempts.jsonl"
RUN_FILE = "run.json"
EVENTS_FILE = "events.jsonl"
INDEX_FILE = "index.html"  # in the output root: every run under it (html/index.py)

Fields = Literal["summary", "pairing", "all"]
"""What `load_run` parses: the summary's fields, the pairing's, or all."""


class ReportError(Exception):
    """Bad input for a report: missing or malformed run directory, refused pairing, ..."""


def read_meta(path: Path) -> dict[str, Any]:
    """A run's `run.json` as a dict ({} when there is none); ReportError when it is not a JSON
    object."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a JSON object")
    return data
