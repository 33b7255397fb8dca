"""What a run directory's files are called, the report error, and the field profiles: the
light part of reporting, which the CLI imports before it knows a report is wanted (load.py
brings pandas, about 1.4 s)."""

from __future__ import annotations

from typing import Literal

ATTEMPTS_FILE = "attempts.jsonl"
RUN_FILE = "run.json"
EVENTS_FILE = "events.jsonl"
INDEX_FILE = "index.html"  # in the output root: every run under it (html_index.py)

Fields = Literal["summary", "pairing", "all"]
"""What `load_run` parses: the summary's fields, the pairing's, or all."""


class ReportError(Exception):
    """Bad input for a report: missing or malformed run directory, refused pairing, ..."""
