"""Glob matching on workspace-relative POSIX paths, with `**` spanning directories.

Python 3.11's fnmatch lets `*` cross `/`, which would make `src/*.py` match `src/a/b.py`; editable
and read-only globs need the stricter, gitignore-like meaning:

- `*` matches any run of characters but `/`; `?` one character but `/`;
- `**` matches any run of characters, `/` included; `**/` matches nothing or any path ending in `/`;
- everything else matches itself, and the whole path must match.

Globs come from task files and from the agent (list_files, search), and paths from the agent, so
matching must cost time linear in the path whatever the pattern: a pattern with several wildcards
is never handed to a backtracking engine (`*a*a*a*a*a*a*a*b` against a long name would take
hours). Patterns with at most one wildcard use `re` (one quantifier cannot backtrack
catastrophically); the others run as a lazily built DFA over bit-set states of the pattern's NFA,
the way RE2 does it: one dictionary look-up per character once warm.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

MAX_GLOB_CHARS = 1024  # longer patterns are refused (GlobError)
_MAX_DFA_STATES = 4096  # per pattern; the transition memo is cleared beyond it (still linear)

# token kinds; _OPT opens an optional `**/` group: it consumes nothing, and either enters the
# group (the `**` and `/` tokens after it) or skips all three
_LIT, _ONE, _STAR, _ANY, _OPT = range(5)


class GlobError(ValueError):
    """A glob the matcher refuses (too long)."""


def _tokens(pattern: str) -> list[tuple[int, str]]:
    """(kind, literal) for each position of the pattern's NFA."""
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += [(_OPT, ""), (_ANY, ""), (_LIT, "/")]
            i += 3
        elif pattern.startswith("**", i):
            out.append((_ANY, ""))
            i += 2
        elif pattern[i] == "*":
            out.append((_STAR, ""))
            i += 1
        elif pattern[i] == "?":
            out.append((_ONE, ""))
            i += 1
        else:
            out.append((_LIT, pattern[i]))
            i += 1
    return out


class _Dfa:
    """Full-match of one glob, simulated as a bit-parallel NFA and memoized into a DFA.

    NFA state i means "the first i tokens matched"; bit m (= number of tokens) is acceptance.
    A literal or `?` at i moves i -> i+1 on a fitting character; `*`/`**` at i loop on i and
    also let i -> i+1 pass without a character; the opening of an optional `**/` group at i lets
    i -> i+1 (into the group) and i -> i+3 (past it) pass without a character.
    """

    def __init__(self, tokens: list[tuple[int, str]]) -> None:
        self.accept = 1 << len(tokens)
        self.classes: dict[str, int] = {"/": 1}  # class 0: any character not named in the glob
        for kind, literal in tokens:
            if kind == _LIT and literal not in self.classes:
                self.classes[literal] = len(self.classes) + 1
        count = len(self.classes) + 1
        reps = [""] * count  # a representative character of each class ("" for "other")
        for char, cls in self.classes.items():
            reps[cls] = char
        self.step_masks: list[int] = [0] * count
        self.loop_masks: list[int] = [0] * count
        self.skip1 = self.skip3 = 0
        for i, (kind, literal) in enumerate(tokens):
            bit = 1 << i
            if kind in (_STAR, _ANY, _OPT):
                self.skip1 |= bit
            if kind == _OPT:
                self.skip3 |= bit
            for cls, rep in enumerate(reps):
                slash = rep == "/"
                if (kind == _LIT and literal == rep) or (kind == _ONE and not slash):
                    self.step_masks[cls] |= bit
                if kind == _ANY or (kind == _STAR and not slash):
                    self.loop_masks[cls] |= bit
        self.start = self._closure(1)
        self.memo: dict[tuple[int, int], int] = {}

    def _closure(self, states: int) -> int:
        while True:
            grown = states | ((states & self.skip1) << 1) | ((states & self.skip3) << 3)
            if grown == states:
                return states
            states = grown

    def match(self, path: str) -> bool:
        states = self.start
        classes, memo = self.classes, self.memo
        for char in path:
            cls = classes.get(char, 0)
            key = (states, cls)
            nxt = memo.get(key)
            if nxt is None:
                nxt = self._closure(
                    ((states & self.step_masks[cls]) << 1) | (states & self.loop_masks[cls])
                )
                if len(memo) >= _MAX_DFA_STATES:
                    memo.clear()
                memo[key] = nxt
            if not nxt:
                return False
            states = nxt
        return bool(states & self.accept)


def _regex(tokens: list[tuple[int, str]]) -> re.Pattern[str]:
    out: list[str] = []
    skip = 0
    for kind, literal in tokens:
        if skip:
            skip -= 1
        elif kind == _OPT:
            out.append("(?:.*/)?")
            skip = 2
        elif kind == _ANY:
            out.append(".*")
        elif kind == _STAR:
            out.append("[^/]*")
        elif kind == _ONE:
            out.append("[^/]")
        else:
            out.append(re.escape(literal))
    return re.compile("".join(out) + r"\Z", re.DOTALL)


@lru_cache(maxsize=512)
def compile_glob(pattern: str) -> re.Pattern[str] | _Dfa:
    """The matcher of one glob: an object whose `.match(path)` is truthy on a full match."""
    if len(pattern) > MAX_GLOB_CHARS:
        raise GlobError(f"glob is {len(pattern)} characters long; the limit is {MAX_GLOB_CHARS}")
    tokens = _tokens(pattern)
    wildcards = sum(1 for kind, _ in tokens if kind in (_STAR, _ANY))
    return _regex(tokens) if wildcards <= 1 else _Dfa(tokens)


def match(pattern: str, path: str) -> bool:
    """Whether the whole of `path` matches `pattern` (both without a leading `./`)."""
    return bool(compile_glob(pattern).match(path))


def matches_any(path: str, patterns: Iterable[str]) -> bool:
    path = path.removeprefix("./")
    return any(match(p.removeprefix("./"), path) for p in patterns)
