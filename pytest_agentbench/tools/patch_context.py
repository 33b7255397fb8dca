"""Explaining a hunk that does not apply: why, and the closest region of the real file.

The nearest region is found in two stages so that large files stay cheap: a linear token-overlap
score picks a few candidate windows, then difflib's ratio over the joined text ranks them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from difflib import SequenceMatcher

from pytest_agentbench.tools.patch_model import Hunk

Line = tuple[str, str]
_TOKEN = re.compile(r"\w+")
_CANDIDATES = 12
_SCAN_LINES = 100_000
_SHOW_MAX = 40
_MARGIN = 2


def describe_mismatch(
    lines: list[Line], hunk: Hunk, stated: int, cursor: int, max_offset: int
) -> str:
    """One sentence on why the hunk's old lines are not where the header says."""
    old = [hl.text for hl in hunk.old_lines]
    n = len(lines)
    if not old:
        if stated < cursor:
            return "the insertion point overlaps the previous hunk; hunks must be in file order"
        return f"cannot insert after line {hunk.old_start}: the file has only {n} lines"
    exact = _matches(lines, old, lambda s: s)
    if exact:
        pos = min(exact, key=lambda p: abs(p - stated))
        if pos < cursor:
            return (
                f"the context and removed lines are at line {pos + 1}, which overlaps the "
                "previous hunk; hunks must be in file order and must not overlap"
            )
        return (
            f"the context and removed lines are at line {pos + 1}, {pos - stated:+d} lines "
            f"from the header's line {hunk.old_start}, beyond the allowed offset of "
            f"±{max_offset} lines; fix the line numbers in the @@ header"
        )
    loose = _matches(lines, old, lambda s: " ".join(s.split()))
    if loose:
        pos = min(loose, key=lambda p: abs(p - stated))
        return (
            f"the lines match at line {pos + 1} only when whitespace is ignored; context and "
            "removed lines must reproduce the file's whitespace exactly (indentation, tabs, "
            "trailing spaces)"
        )
    prefix = "context/removed lines do not match the file (no fuzzy matching is done): "
    if stated >= n:
        return prefix + f"the hunk starts at line {hunk.old_start} but the file has {n} lines"
    for k, text in enumerate(old):
        at = stated + k
        if at >= n:
            return prefix + f"the hunk runs past the end of the file ({n} lines)"
        if lines[at][0] != text:
            return prefix + (
                f"at line {at + 1} the patch expects {_short(text)} but the file "
                f"has {_short(lines[at][0])}"
            )
    return prefix + "the lines differ"  # pragma: no cover - a full match would have applied


def nearest_context(lines: list[Line], old: list[str], stated: int) -> str:
    """The closest region of the file to `old`, numbered, with a little margin either side."""
    if not lines:
        return "(the file is empty)"
    width = max(1, len(old))
    start = _best_window(lines, old, stated) if old else min(max(stated, 0), len(lines) - 1)
    lo = max(0, start - _MARGIN)
    hi = min(len(lines), start + width + _MARGIN, lo + _SHOW_MAX)
    return "\n".join(f"{i + 1:>6} | {_clip(lines[i][0])}" for i in range(lo, hi))


def _best_window(lines: list[Line], old: list[str], stated: int) -> int:
    n, width = len(lines), len(old)
    lo, hi = 0, max(0, n - width)
    if n > _SCAN_LINES:
        lo = max(0, min(stated, hi) - _SCAN_LINES // 2)
        hi = min(hi, lo + _SCAN_LINES)
    stripped = {text.strip() for text in old if text.strip()}
    tokens = {t for text in old for t in _TOKEN.findall(text)}
    prefix = [0.0]
    for text, _ in lines:
        line_tokens = _TOKEN.findall(text)
        score = 2.0 if text.strip() in stripped else 0.0
        if line_tokens:
            score += sum(t in tokens for t in line_tokens) / len(line_tokens)
        prefix.append(prefix[-1] + score)
    anchor = min(max(stated, lo), hi)
    ranked = sorted(
        range(lo, hi + 1), key=lambda p: (-(prefix[min(n, p + width)] - prefix[p]), abs(p - anchor))
    )
    candidates = set(ranked[:_CANDIDATES]) | {anchor}
    matcher = SequenceMatcher(None, autojunk=False)
    matcher.set_seq2("\n".join(old))
    best, best_key = anchor, (-1.0, 0)
    for pos in candidates:
        matcher.set_seq1("\n".join(text for text, _ in lines[pos : pos + width]))
        key = (matcher.ratio(), -abs(pos - stated))
        if key > best_key:
            best, best_key = pos, key
    return best


def _matches(lines: list[Line], old: list[str], norm: Callable[[str], str]) -> list[int]:
    want = [norm(text) for text in old]
    have = [norm(text) for text, _ in lines]
    first = want[0]
    return [
        p
        for p in range(len(have) - len(want) + 1)
        if have[p] == first and have[p : p + len(want)] == want
    ]


def _short(text: str, limit: int = 120) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _clip(text: str, limit: int = 240) -> str:
    return text if len(text) <= limit else text[:limit] + " [...]"
