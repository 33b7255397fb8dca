"""Run directory layout and the few careful writers it needs."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

TORN_SUFFIX = ".torn"


def append_jsonl(path: Path, obj: dict[str, Any]) -> None:
    """Append one line, flushed and fsynced: a crash loses at most the line being written, and
    a line torn by an earlier crash is set aside first (`repair_jsonl`), so the new line never
    lands on the end of a fragment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(obj, sort_keys=True, ensure_ascii=False) + "\n"
    if not ends_with_newline(path):
        repair_jsonl(path)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def ends_with_newline(path: Path) -> bool:
    """True for a missing or empty file and for one whose last byte is a newline."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            return size == 0 or os.pread(handle.fileno(), 1, size - 1) == b"\n"
    except FileNotFoundError:
        return True


def repair_jsonl(path: Path) -> str | None:
    """Make `path` end at a line boundary again; say what was done (None: nothing to do).

    A last line without its newline was torn by a writer killed mid-write. If it is still a
    whole JSON object only the newline was lost, and it gets one. Anything else is appended to
    `<path>.torn` (so nothing is silently dropped) and cut off `path`.
    """
    if ends_with_newline(path):
        return None
    with path.open("r+b") as handle:
        size = os.fstat(handle.fileno()).st_size
        cut = _last_newline(handle.fileno(), size)
        fragment = os.pread(handle.fileno(), size - cut - 1, cut + 1)
        if _is_json_object(fragment):
            handle.seek(0, os.SEEK_END)
            handle.write(b"\n")
            handle.flush()
            os.fsync(handle.fileno())
            return f"{path.name}: its last line had lost its newline; completed"
        torn = path.with_name(path.name + TORN_SUFFIX)
        with torn.open("ab") as aside:
            aside.write(fragment + b"\n")
            aside.flush()
            os.fsync(aside.fileno())
        handle.truncate(cut + 1)
        handle.flush()
        os.fsync(handle.fileno())
    return (
        f"{path.name}: torn last line ({len(fragment)} bytes, a writer killed mid-line) "
        f"moved to {torn.name}"
    )


def _last_newline(fd: int, size: int, chunk: int = 65536) -> int:
    """Offset of the last b"\\n" in the file, -1 if there is none."""
    end = size
    while end > 0:
        start = max(0, end - chunk)
        found = os.pread(fd, end - start, start).rfind(b"\n")
        if found >= 0:
            return start + found
        end = start
    return -1


def _is_json_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:
        return False


def read_jsonl(path: Path, problems: list[str] | None = None) -> list[dict[str, Any]]:
    """Every complete JSON-object line. A torn last line (crash mid-write) and any other line
    that is not a JSON object are skipped, each described in `problems` when given."""
    if not path.exists():
        return []
    rows = []
    data = path.read_bytes()
    lines = data.split(b"\n")
    torn = lines.pop() if lines else b""  # after the last newline: b"" unless torn
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
        elif problems is not None:
            problems.append(f"{path.name}: line {number} is not a JSON object; skipped")
    if torn.strip():
        if _is_json_object(torn):
            rows.append(json.loads(torn))
        elif problems is not None:
            problems.append(
                f"{path.name}: torn last line ({len(torn)} bytes, a writer killed mid-line) skipped"
            )
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
