"""Pack candidate code ranges under a token budget, in priority order, each one included or
excluded with a reason.

Token estimate: ceil(characters / CHARS_PER_TOKEN) of the block exactly as the model sees it
(a header line and a fenced code block), 4 characters a token like llm_v0's budget check. The
candidates come best first; a candidate whose lines are already included is a "duplicate range",
one partly included keeps only its new lines, one that does not fit is "over budget" (a later,
smaller candidate for the same place may still fit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

CHARS_PER_TOKEN = 4  # the same estimate as agents.llm_v0.CHARS_PER_TOKEN


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Source:
    """A workspace file as read: its lines (no line ends), `total` lines in the whole file
    (more than len(lines) when the read was cut at the tool's limit)."""

    path: str
    lines: tuple[str, ...]
    total: int

    @classmethod
    def from_text(cls, path: str, text: str, total: int | None = None) -> Source:
        lines = tuple(text.split("\n"))
        if lines and lines[-1] == "":
            lines = lines[:-1]
        return cls(path, lines, total if total is not None else len(lines))


@dataclass(frozen=True)
class PackCandidate:
    """A range to consider (1-based, inclusive; None: the whole file), or with `signatures` the
    file's def/class lines only. `excluded` is a reason decided before packing (not in the
    workspace, site-packages...)."""

    path: str
    reason: str
    start: int | None = None
    end: int | None = None
    signatures: bool = False
    excluded: str | None = None


@dataclass
class Item:
    """One manifest entry; `text` is the block the model sees (empty when excluded)."""

    path: str
    start_line: int | None
    end_line: int | None
    included: bool
    reason: str
    tokens: int
    text: str = ""
    signatures: bool = False

    def manifest(self) -> dict[str, object]:
        return {"path": self.path, "start_line": self.start_line, "end_line": self.end_line,
                "included": self.included, "reason": self.reason, "tokens": self.tokens}


@dataclass
class Packed:
    budget_tokens: int
    items: list[Item] = field(default_factory=list)

    @property
    def used_tokens(self) -> int:
        return sum(i.tokens for i in self.items if i.included)

    @property
    def included(self) -> list[Item]:
        return [i for i in self.items if i.included]

    @property
    def excluded(self) -> list[Item]:
        return [i for i in self.items if not i.included]


def render_range(path: str, start: int, end: int, lines: tuple[str, ...] | list[str]) -> str:
    body = "\n".join(lines[start - 1:end])
    return f"{path} (lines {start}-{end}):\n```python\n{body}\n```\n"


def signature_lines(source: Source) -> list[str]:
    """`N: def name(...):` for every def/class line, in file order."""
    out = []
    for number, line in enumerate(source.lines, 1):
        stripped = line.lstrip()
        if stripped.startswith(("def ", "async def ", "class ")):
            out.append(f"{number}: {line.rstrip()}")
    return out


def render_signatures(source: Source) -> str:
    body = "\n".join(signature_lines(source))
    return f"{source.path} (signatures only, {source.total} lines):\n```python\n{body}\n```\n"


def pack(candidates: list[PackCandidate], sources: dict[str, Source], budget_tokens: int) -> Packed:
    """Decide every candidate in order (see the module docstring)."""
    packed = Packed(budget_tokens)
    covered: dict[str, list[tuple[int, int]]] = {}

    def left() -> int:
        return budget_tokens - packed.used_tokens

    for cand in candidates:
        source = sources.get(cand.path)
        if cand.excluded is not None or source is None:
            reason = cand.excluded or f"not read: {cand.reason}"
            packed.items.append(Item(cand.path, cand.start, cand.end, False, reason, 0))
            continue
        if cand.signatures:
            _signatures(packed, cand, source, covered.get(cand.path, []), left())
            continue
        start = max(1, cand.start or 1)
        end = min(cand.end or source.total, len(source.lines))
        if start > end:
            packed.items.append(Item(cand.path, cand.start, cand.end, False,
                                     f"beyond the lines read: {cand.reason}", 0))
            continue
        segments = _uncovered(covered.get(cand.path, []), start, end)
        if not segments:
            tokens = estimate_tokens(render_range(cand.path, start, end, source.lines))
            packed.items.append(Item(cand.path, start, end, False,
                                     f"duplicate range (already included): {cand.reason}",
                                     tokens))
            continue
        for seg_start, seg_end in segments:
            text = render_range(cand.path, seg_start, seg_end, source.lines)
            tokens = estimate_tokens(text)
            if tokens <= left():
                packed.items.append(Item(cand.path, seg_start, seg_end, True, cand.reason,
                                         tokens, text))
                covered.setdefault(cand.path, []).append((seg_start, seg_end))
            else:
                packed.items.append(Item(cand.path, seg_start, seg_end, False,
                                         f"over budget ({tokens} tokens, {left()} left): "
                                         f"{cand.reason}", tokens))
    return packed


def _signatures(packed: Packed, cand: PackCandidate, source: Source,
                covered: list[tuple[int, int]], left: int) -> None:
    if not _uncovered(covered, 1, source.total):
        packed.items.append(Item(cand.path, 1, source.total, False,
                                 f"duplicate range (whole file included): {cand.reason}", 0,
                                 signatures=True))
        return
    if not signature_lines(source):
        packed.items.append(Item(cand.path, 1, source.total, False,
                                 f"no def/class lines: {cand.reason}", 0, signatures=True))
        return
    text = render_signatures(source)
    tokens = estimate_tokens(text)
    included = tokens <= left
    reason = cand.reason if included else f"over budget ({tokens} tokens, {left} left): " \
                                          f"{cand.reason}"
    packed.items.append(Item(cand.path, 1, source.total, included, reason, tokens,
                             text if included else "", signatures=True))


def _uncovered(covered: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """The parts of start..end no covered range holds, in order."""
    out = []
    cursor = start
    for c_start, c_end in sorted(covered):
        if c_end < cursor or c_start > end:
            continue
        if c_start > cursor:
            out.append((cursor, c_start - 1))
        cursor = max(cursor, c_end + 1)
        if cursor > end:
            break
    if cursor <= end:
        out.append((cursor, end))
    return out


def render_packed(packed: Packed) -> str:
    """The included blocks grouped by file (files in the order they were first included), each
    file's ranges by line; signatures after a file's ranges."""
    order: list[str] = []
    for item in packed.included:
        if item.path not in order:
            order.append(item.path)
    blocks = []
    for path in order:
        items = [i for i in packed.included if i.path == path]
        items.sort(key=lambda i: (i.signatures, i.start_line or 0))
        blocks += [i.text for i in items]
    return "\n".join(blocks)
