"""Run directory layout (spec §4) and the few careful writers it needs."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any


def append_jsonl(path: Path, obj: dict[str, Any]) -> None:
    """Append one line, flushed and fsynced: a crash loses at most the line being written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(obj, sort_keys=True, ensure_ascii=False) + "\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every complete line; a torn last line (crash mid-write) is ignored."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", "utf-8")
    os.replace(tmp, path)


class AttemptPaths:
    """Where one attempt's artifacts go: tasks/<task_id>/ or tasks/<task_id>/<attempt-label>/."""

    def __init__(self, run_dir: Path, task_id: str, attempt_label: str | None) -> None:
        self.run_dir = run_dir
        rel = Path("tasks") / task_id
        if attempt_label:
            rel = rel / attempt_label
        self.rel = rel
        self.root = run_dir / rel
        if self.root.is_dir() and any(self.root.iterdir()):
            # left by an attempt that was killed (resume reruns it): keep it, apart
            self.root.rename(
                self.root.with_name(f"{self.root.name}.aborted-{uuid.uuid4().hex[:6]}")
            )
        for sub in ("logs", "agent", "diffs", "meta"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    def log(self, name: str) -> Path:
        return self.root / "logs" / name

    def relative(self, path: Path) -> str:
        return path.relative_to(self.run_dir).as_posix()
