"""What a harvest has decided so far, one JSON line per commit, so an interrupted harvest
resumes without redoing a decided commit. The options that shape decisions are stored beside
it; resuming with other options is refused (start again with --fresh)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATE, OPTIONS = "state.jsonl", "options.json"


@dataclass
class Outcome:
    sha: str
    reason: str  # VALIDATED, or the one reason it was dropped
    stage: str  # walk | filter | setup | tests | gate | done
    seconds: float = 0.0
    task_id: str | None = None
    kind: str | None = None
    setup_ran: bool = False
    detail: str = ""
    stage_seconds: dict[str, float] = field(default_factory=dict)


class HarvestState:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.decided: dict[str, Outcome] = {}

    def open(self, options: dict[str, Any], fresh: bool,
             redo: frozenset[str] = frozenset()) -> str | None:
        """Load what is decided (but commits dropped for a reason in `redo`, decided again); a
        problem line when the options differ from the stored ones."""
        if fresh:
            shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        stored = self.root / OPTIONS
        options = json.loads(json.dumps(options))  # as stored: a tuple is a list
        if stored.is_file():
            before = json.loads(stored.read_text("utf-8"))
            if before != options:
                changed = sorted(k for k in set(before) | set(options)
                                 if before.get(k) != options.get(k))
                return (f"{stored}: an earlier harvest into this suite used other options "
                        f"({', '.join(changed)}); pass --fresh to start again")
        stored.write_text(json.dumps(options, sort_keys=True), "utf-8")
        path = self.root / STATE
        if path.is_file():
            _cut_torn_tail(path)
            for line in path.read_text("utf-8").splitlines():
                try:
                    outcome = Outcome(**json.loads(line))
                except (ValueError, TypeError):
                    continue  # a line torn by a crash: that commit is decided again
                self.decided[outcome.sha] = outcome
        for sha in [s for s, o in self.decided.items() if o.reason in redo]:
            del self.decided[sha]
        return None

    def record(self, outcome: Outcome) -> None:
        self.decided[outcome.sha] = outcome
        with (self.root / STATE).open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(outcome)) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _cut_torn_tail(path: Path) -> None:
    """Drop a last line a crash left without its newline: the next decision appended to it
    would be lost with it."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)
