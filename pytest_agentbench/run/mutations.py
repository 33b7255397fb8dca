"""Mutants of a task's reference solution, for its test-adequacy score (run/adequacy.py).

A mutant is the oracle's fix with one small fault put back into the lines the fix changed:
the tests that decide the task should notice it. The classic mutation operators, applied only
where the oracle patch adds or changes a line of a file that is not a test file:

- `hunk-revert`: one hunk of the oracle patch left out (the fix done partly). Not made when
  the patch has a single hunk: leaving it out is the unfixed code, which nop already runs.
- `comparison` (relational operator replacement): `<` <-> `<=`, `>` <-> `>=`, `==` <-> `!=`,
  `is` <-> `is not`, `in` <-> `not in` (the boundary or the negation of each).
- `arithmetic`: `+` <-> `-`, `*` <-> `/`, `//` -> `/`, `%` -> `//`, `**` -> `*`.
- `boolean`: `and` <-> `or`; `not x` -> `x`.
- `condition`: the test of an `if`/`while`/conditional expression negated, `not (...)`.
- `constant`: an int or float n -> n + 1, True <-> False, a non-empty string -> "" and an
  empty one -> "mutant".
- `statement-drop`: a simple statement (assignment, call, return, raise, ...) -> `pass`.

Python files get every operator (found with `ast`, applied to the source text at the node's
position so the rest of the file stays byte for byte; docstrings and everything inside an
f-string are left alone); other files only hunk reverts. A mutant
that does not parse, equals the fix or the unfixed code, or repeats another is dropped. The
score is a lower bound: an equivalent mutant (one no test could tell from the fix) counts as a
survivor.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass

from pytest_agentbench.reporting.scan import is_test_path
from pytest_agentbench.tools.patch_model import Hunk
from pytest_agentbench.tools.patch_parse import parse_patch


@dataclass(frozen=True)
class Mutant:
    """One mutant: the file it changes, the operator, where (1-based line of the mutated file)
    and what it did in a few words, and the whole patch to apply instead of the oracle's."""

    path: str
    operator: str
    line: int
    what: str
    patch: str

    def label(self) -> str:
        return f"{self.path}:{self.line} {self.operator}: {self.what}"


class MutationError(ValueError):
    """The oracle patch cannot be replayed on the files given (one line)."""


def mutants(oracle_patch: str, read: dict[str, str | None]) -> list[Mutant]:
    """Every mutant of `oracle_patch`, given the pre-fix text of each file it changes (`read`:
    path -> text, None for a file it creates)."""
    files = parse_patch(oracle_patch)
    sections = _sections(oracle_patch)
    fixed: dict[str, tuple[str | None, str | None, set[int]]] = {}
    for fp in files:
        old = read.get(fp.old_path) if fp.old_path else None
        if fp.old_path and old is None:
            raise MutationError(f"{fp.old_path}: not in the workspace the oracle patch fixes")
        new, changed = _apply(old or "", fp.hunks) if fp.new_path else (None, set())
        fixed[fp.path] = (old if fp.old_path else None, new, changed)
    out: list[Mutant] = []
    hunks = [(fp, i) for fp in files for i in range(len(fp.hunks)) if not is_test_path(fp.path)]
    if sum(len(fp.hunks) for fp in files) > 1:
        for fp, i in hunks:
            old = fixed[fp.path][0]
            text, _ = _apply(old or "", fp.hunks, skip=i) if fp.new_path else (old, set())
            header = fp.hunks[i].header.split("@@")[-1].strip()
            out.append(_mutant(fp.path, "hunk-revert", fp.hunks[i].new_start,
                               f"hunk {i + 1} left out{': ' + header if header else ''}",
                               text, fixed, sections))
    for path, (_old, new, changed) in fixed.items():
        if new is None or is_test_path(path) or not path.endswith(".py"):
            continue
        for line, operator, what, text in python_mutations(new, changed):
            out.append(_mutant(path, operator, line, what, text, fixed, sections))
    return _unique([m for m in out if m.patch])


def _unique(found: list[Mutant]) -> list[Mutant]:
    seen: set[str] = set()
    kept = []
    for m in found:
        if m.patch not in seen:
            seen.add(m.patch)
            kept.append(m)
    return kept


def _sections(patch: str) -> dict[str, str]:
    """Each file's section of a git patch, by its new (else old) path, verbatim."""
    out: dict[str, str] = {}
    for chunk in re.split(r"(?m)^(?=diff --git )", patch):
        if chunk.startswith("diff --git "):
            for fp in parse_patch(chunk):
                out[fp.path] = chunk if chunk.endswith("\n") else chunk + "\n"
    return out


def _mutant(path: str, operator: str, line: int, what: str, text: str | None,
            fixed: dict[str, tuple[str | None, str | None, set[int]]],
            sections: dict[str, str]) -> Mutant:
    """The patch: `path` as `text` (vs its pre-fix text), every other file as the oracle's."""
    old, new, _ = fixed[path]
    if text == new:
        return Mutant(path, operator, line, what, "")
    body = "".join(sections.get(p, "") for p in fixed if p != path)  # "" alone: the nop
    return Mutant(path, operator, line, what, file_diff(path, old, text) + body)


def file_diff(path: str, old: str | None, new: str | None) -> str:
    """A git patch taking `path` from `old` to `new` (None: absent)."""
    head = f"diff --git a/{path} b/{path}\n"
    if old is None:
        head += "new file mode 100644\n"
    elif new is None:
        head += "deleted file mode 100644\n"
    lines = difflib.unified_diff((old or "").splitlines(keepends=True),
                                 (new or "").splitlines(keepends=True),
                                 "/dev/null" if old is None else f"a/{path}",
                                 "/dev/null" if new is None else f"b/{path}")
    body = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in lines)
    return head + body if body else ""


def _apply(old: str, hunks: list[Hunk], skip: int | None = None) -> tuple[str, set[int]]:
    """`old` with `hunks` applied (but hunk `skip`); and the 1-based lines of the result the
    patch added. Exact: an oracle patch applies at its task's commit."""
    lines = old.splitlines(keepends=True)
    out: list[str] = []
    changed: set[int] = set()
    pos = 0
    for index, hunk in enumerate(hunks):
        start = hunk.old_start - 1 if hunk.old_count else hunk.old_start
        if start < pos or start + hunk.old_count > len(lines):
            raise MutationError(f"hunk {hunk.header.strip()} does not fit the file")
        out += lines[pos:start]
        pos = start
        for hl in hunk.lines:
            if hl.tag != "+":
                if lines[pos].rstrip("\r\n") != hl.text:
                    raise MutationError(f"hunk {hunk.header.strip()} does not match the file")
                if hl.tag == " " or index == skip:
                    out.append(lines[pos])
                pos += 1
            elif index != skip:
                out.append(hl.text + ("" if hl.no_newline else "\r\n" if hl.crlf else "\n"))
                changed.add(len(out))
    return "".join(out + lines[pos:]), changed


FLIP_COMPARE = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="),
                ast.GtE: (">=", ">"), ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="),
                ast.Is: (r"\bis\b", "is not"), ast.IsNot: (r"\bis\s+not\b", "is"),
                ast.In: (r"\bin\b", "not in"), ast.NotIn: (r"\bnot\s+in\b", "in")}
FLIP_ARITH = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "/"),
              ast.Div: ("/", "*"), ast.FloorDiv: ("//", "/"), ast.Mod: ("%", "//"),
              ast.Pow: ("**", "*")}
SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise,
          ast.Assert, ast.Delete, ast.Break, ast.Continue)


def python_mutations(text: str, lines: set[int]) -> list[tuple[int, str, str, str]]:
    """(line, operator, what, mutated text) for each mutation of a node on `lines`."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    source = text.encode("utf-8")
    starts = [0]
    for raw in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(raw))
    skip = _docstrings_and_fstrings(tree)
    edits: list[tuple[int, str, str, int, int, bytes]] = []

    def at(line: int, col: int) -> int:
        return starts[line - 1] + col

    def span(node: ast.AST) -> tuple[int, int]:
        return (at(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                at(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def between(left: ast.AST, right: ast.AST, pattern: str, new: str, op: str) -> None:
        lo, hi = span(left)[1], span(right)[0]
        found = re.search(rf"(?<![=<>!*/]){pattern}(?![=<>*/])", source[lo:hi].decode())
        if found:
            a = lo + len(source[lo:hi].decode()[:found.start()].encode())
            b = a + len(found.group().encode())
            line = source[:a].count(b"\n") + 1
            edits.append((line, op, f"`{found.group()}` -> `{new}`", a, b, new.encode()))

    for node in ast.walk(tree):
        if id(node) in skip:  # positions inside an f-string are not reliable before 3.12
            continue
        if isinstance(node, ast.Compare):
            for i, cmp_op in enumerate(node.ops):
                pattern, new = FLIP_COMPARE[type(cmp_op)]
                left = node.left if i == 0 else node.comparators[i - 1]
                between(left, node.comparators[i], _quote(pattern), new, "comparison")
        elif isinstance(node, ast.BinOp) and type(node.op) in FLIP_ARITH:
            old_op, new = FLIP_ARITH[type(node.op)]
            between(node.left, node.right, re.escape(old_op), new, "arithmetic")
        elif isinstance(node, ast.BoolOp):
            word, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            for left, right in zip(node.values, node.values[1:], strict=False):
                between(left, right, rf"\b{word}\b", new, "boolean")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            a, b = span(node)
            inner = source[slice(*span(node.operand))]
            edits.append((node.lineno, "boolean", "`not` dropped", a, b, inner))
        elif isinstance(node, ast.If | ast.While | ast.IfExp):
            a, b = span(node.test)
            edits.append((node.test.lineno, "condition", "condition negated", a, b,
                          b"not (" + source[a:b] + b")"))
        elif isinstance(node, ast.Constant):
            new_value = _constant(node.value)
            if new_value is not None:
                a, b = span(node)
                edits.append((node.lineno, "constant", f"{source[a:b].decode()[:40]} -> "
                              f"{new_value[:40]}", a, b, new_value.encode()))
        if isinstance(node, SIMPLE):
            a, b = span(node)
            edits.append((node.lineno, "statement-drop",
                          f"`{source[a:b].decode().splitlines()[0][:60]}` -> `pass`",
                          a, b, b"pass"))
    out = []
    for line, op, what, a, b, new_bytes in sorted(edits, key=lambda e: (e[3], e[1])):
        if line not in lines:
            continue
        mutated = (source[:a] + new_bytes + source[b:]).decode("utf-8")
        try:
            ast.parse(mutated)
        except (SyntaxError, ValueError):
            continue
        out.append((line, op, what, mutated))
    return out


def _quote(pattern: str) -> str:
    return pattern if "\\" in pattern or "|" in pattern else re.escape(pattern)


def _constant(value: object) -> str | None:
    if isinstance(value, bool):
        return repr(not value)
    if isinstance(value, int | float):
        return repr(value + 1)
    if isinstance(value, str):
        return '""' if value else '"mutant"'
    return None


def _docstrings_and_fstrings(tree: ast.AST) -> set[int]:
    """ids of the nodes no operator touches: docstrings (and their Expr statements) and every
    node inside an f-string."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            skip.update((id(body[0]), id(body[0].value)))
        if isinstance(node, ast.JoinedStr):
            skip.update(id(inner) for inner in ast.walk(node))
    return skip


__all__ = ["Mutant", "MutationError", "file_diff", "is_test_path", "mutants",
           "python_mutations"]
