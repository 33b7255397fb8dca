"""Glob matching on workspace-relative POSIX paths, with `**` spanning directories.

Python 3.11's fnmatch lets `*` cross `/`, which would make `src/*.py` match `src/a/b.py`; editable
and read-only globs need the stricter, gitignore-like meaning.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache


@lru_cache(maxsize=512)
def _compile(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches_any(path: str, patterns: Iterable[str]) -> bool:
    path = path.removeprefix("./")
    return any(_compile(p.removeprefix("./")).match(path) for p in patterns)
