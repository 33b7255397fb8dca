"""The task's description: the commit message without what would give the fix away.

Removed: issue and pull-request references (`(#123)`, `#123`, `GH-123`, `fixes #1`), commit
hashes, URLs, trailers (`Signed-off-by:`, `Co-authored-by:` ...), and any line that repeats a
line the fix adds (the fix's own code). With `--statement tests` the description is instead
"make these failing tests pass" with the FAIL_TO_PASS tests.
"""

from __future__ import annotations

import re

_REFS = re.compile(r"\(#\d+\)|\b(?:GH|gh)-\d+\b|(?<![\w/])#\d+\b")
_CLOSES = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s*(?=[,.;]|$)",
                     re.IGNORECASE)
# a commit hash has letters and digits: a number like 2147483647 is kept
_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")
_URL = re.compile(r"https?://\S+")
_TRAILER = re.compile(r"^[A-Z][A-Za-z-]+-by:|^(?:Refs?|See|Closes|Fixes|Resolves):",
                      re.IGNORECASE)
MAX_CHARS = 4_000


def _added(fix_patch: str) -> set[str]:
    """The lines the fix adds that are long enough to be its code, stripped."""
    return {line[1:].strip() for line in fix_patch.splitlines()
            if line.startswith("+") and not line.startswith("+++") and len(line.strip()) > 12}


def leaked_code(text: str, fix_patch: str) -> str | None:
    """A line of code the fix adds that `text` (a description given by hand) repeats, or None."""
    return next((line for line in sorted(_added(fix_patch)) if line in text), None)


def from_commit(subject: str, body: str, fix_patch: str) -> str:
    added = _added(fix_patch)
    lines = []
    for line in [subject, *body.splitlines()]:
        if _TRAILER.match(line.strip()) or line.strip() in added:
            continue
        line = _URL.sub("", line)
        line = _HASH.sub("", _REFS.sub("", line))
        line = _CLOSES.sub("", line)
        lines.append(re.sub(r"[ \t]{2,}", " ", line).rstrip())
    text = "\n".join(lines).strip()
    text = re.sub(r"\n{3,}", "\n\n", text)
    return (text or "Fix the bug the failing tests show.")[:MAX_CHARS]


def from_tests(fail_to_pass: tuple[str, ...]) -> str:
    shown = "\n".join(f"- {t}" for t in fail_to_pass[:50])
    more = f"\n(and {len(fail_to_pass) - 50} more)" if len(fail_to_pass) > 50 else ""
    return f"Make these failing tests pass without breaking the others:\n{shown}{more}"
