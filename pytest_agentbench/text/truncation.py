"""Head/tail truncation of command output.

Keeps the first `head_lines` and last `tail_lines` lines, and caps the bytes kept, so that a
runaway command cannot fill the disk or the model's context. The flags say what was dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_HEAD_LINES = 200
DEFAULT_TAIL_LINES = 200
DEFAULT_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class Truncated:
    text: str
    truncated: bool
    total_lines: int
    kept_head_lines: int
    kept_tail_lines: int


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def count_lines(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def truncate(
    text: str,
    head_lines: int = DEFAULT_HEAD_LINES,
    tail_lines: int = DEFAULT_TAIL_LINES,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Truncated:
    lines = text.splitlines(keepends=True)
    total = len(lines)
    if total <= head_lines + tail_lines and len(text.encode()) <= max_bytes:
        return Truncated(text, False, total, total, 0)
    head = lines[:head_lines]
    tail = lines[max(head_lines, total - tail_lines) :] if tail_lines else []
    half = max_bytes // 2
    head_text = _cap("".join(head), half, keep_start=True)
    tail_text = _cap("".join(tail), half, keep_start=False)
    dropped = total - len(head) - len(tail)
    marker = (
        f"\n[... agentbench: {dropped} lines / {len(text.encode())} bytes in all; truncated ...]\n"
    )
    return Truncated(head_text + marker + tail_text, True, total, len(head), len(tail))


def _cap(text: str, limit: int, keep_start: bool) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return decode(data[:limit] if keep_start else data[-limit:])
