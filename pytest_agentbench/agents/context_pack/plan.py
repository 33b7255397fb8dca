"""Which code to consider for the first observation, best first (then `packing.pack` decides):

1. traceback frames in the workspace, deepest (last printed) first: the enclosing function when
   it is at most `cheap_function_lines` long, else ±`frame_context_lines` around the line; each
   followed by a narrower ±`narrow_context_lines` fallback inside it (for when the wider one is
   over budget); a module an ImportError names: the whole file when it is in the workspace,
   else its package's `__init__.py`;
2. the failing tests' functions, then a test file with no test id (a collection error) whole;
   then the definitions of names that a frame or test file imports (`from m import f`) and the
   failure names (in an `E` line or a failing test's body), followed through one re-export;
   then, found with `search`, the lines outside the tests that assign to such a name
   (`module.f = other`: a monkey-patch or stale override), ±`narrow_context_lines`;
3. the header (imports, constants) of every frame and test file;
4. the workspace modules those files import (one level deep): whole, else their signatures.

Frames outside the workspace (site-packages, the standard library) and missing modules become
excluded items. Reading goes through `read` (the agent's toolbox), so this stays pure.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable, Container
from dataclasses import dataclass

from pytest_agentbench.agents.context_pack.imports import (
    candidate_paths,
    imported_modules,
    module_files,
    resolve,
)
from pytest_agentbench.agents.context_pack.packing import PackCandidate, Source
from pytest_agentbench.agents.context_pack.traceback_refs import (
    FailingTest,
    FailureRefs,
    is_test_file,
)

Reader = Callable[[str], Source | None]
Searcher = Callable[[str], list[tuple[str, int]]]
_MAX_REBINDINGS = 5
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class PlanParams:
    frame_context_lines: int = 30
    narrow_context_lines: int = 8
    cheap_function_lines: int = 80


class _Plan:
    def __init__(self, workspace: Container[str], read: Reader, params: PlanParams) -> None:
        self.workspace, self.read_file, self.params = workspace, read, params
        self.sources: dict[str, Source] = {}
        self.candidates: list[PackCandidate] = []
        self.excluded_paths: set[str] = set()

    def read(self, path: str) -> Source | None:
        if path not in self.sources:
            source = self.read_file(path) if path in self.workspace else None
            if source is None:
                return None
            self.sources[path] = source
        return self.sources[path]

    def add(self, cand: PackCandidate) -> None:
        if cand not in self.candidates:
            self.candidates.append(cand)

    def exclude(self, path: str, reason: str) -> None:
        """Once per path: the first reason is the one that matters."""
        if path not in self.excluded_paths:
            self.excluded_paths.add(path)
            self.candidates.append(PackCandidate(path, reason, excluded=reason))


def plan(refs: FailureRefs, workspace: Container[str], read: Reader,
         params: PlanParams | None = None, search: Searcher | None = None,
         ) -> tuple[list[PackCandidate], dict[str, Source]]:
    """(candidates best first, the sources read), see the module docstring. `search(regex)`
    gives the (path, line) of matching lines in the workspace's .py files."""
    p = _Plan(workspace, read, params or PlanParams())
    context_files: list[str] = []
    for frame in reversed(refs.frames):
        outside = _outside(frame.path)
        if outside:
            p.exclude(frame.path, f"{outside} (traceback frame, line {frame.line})")
            continue
        source = p.read(frame.path)
        if source is None:
            p.exclude(frame.path, f"not in workspace (traceback frame, line {frame.line})")
            continue
        context_files.append(frame.path)
        for cand in _frame_candidates(source, frame.line, p.params):
            p.add(cand)
    for module in refs.missing_modules:
        files = module_files(module, workspace)
        if files and p.read(files[0]) is not None:
            p.add(PackCandidate(files[0], f"named by an ImportError ({module})"))
            context_files.append(files[0])
        else:
            p.exclude(candidate_paths(module)[0], f"not in workspace (missing module {module})")
            parent = module.rpartition(".")[0]
            package = module_files(parent, workspace)[:1] if parent else []
            if package and p.read(package[0]) is not None:
                p.add(PackCandidate(package[0], f"package of the missing module {module}"))
    tests = [t for t in refs.test_ids if p.read(t.path) is not None]
    for test in tests:
        span = _function_span(p.sources[test.path], test)
        if span is None:
            p.add(PackCandidate(test.path, f"failing test {test} (def not found: whole file)"))
        else:
            p.add(PackCandidate(test.path, f"failing test {test}", *span))
    for path in refs.test_files:
        if p.read(path) is None:
            if not _outside(path):
                p.exclude(path, "not in workspace (test file)")
            continue
        context_files.append(path)
        if not any(t.path == path for t in tests):
            p.add(PackCandidate(path, "failing test file (no test id: collection error?)"))
    context_files = list(dict.fromkeys(context_files))
    hot = _named_in_failure(refs, p, tests)
    named = [n for path in context_files for n in _definitions(p, path, hot)]
    _rebindings(p, named, search)
    for path in context_files:
        end = _header_end(p.sources[path])
        if end:
            p.add(PackCandidate(path, "module header (imports, constants)", 1, end))
    for path in context_files:
        _imports(p, path)
    return p.candidates, p.sources


def _named_in_failure(refs: FailureRefs, p: _Plan, tests: list[FailingTest]) -> set[str]:
    """The identifiers in the `E` lines and in the failing tests' functions."""
    texts = list(refs.error_lines)
    for test in tests:
        span = _function_span(p.sources[test.path], test)
        if span is not None:
            texts += p.sources[test.path].lines[span[0] - 1:span[1]]
    return {word for text in texts for word in _IDENTIFIER.findall(text)}


def _definitions(p: _Plan, path: str, hot: set[str]) -> list[str]:
    """The defs/classes `path` imports by name (`from m import f`) that the failure names
    (followed through one re-export, `from m.sub import f` in m); returns those names."""
    names = []
    for imported in imported_modules("\n".join(p.sources[path].lines), path):
        for name in imported.names:
            if name not in hot:
                continue
            names.append(name)
            found = _definition(p, imported.module, name, hops=1)
            if found is not None:
                target, span = found
                p.add(PackCandidate(target, f"definition of {name} (named in the failure, "
                                        f"imported by {path})", *span))
    return names


def _definition(p: _Plan, module: str, name: str, hops: int
                ) -> tuple[str, tuple[int, int]] | None:
    for target in module_files(module, p.workspace)[:1]:
        source = p.read(target)
        if source is None:
            return None
        span = _top_level_span(source, name)
        if span is not None:
            return target, span
        if hops > 0:
            for imported in imported_modules("\n".join(source.lines), target):
                if name in imported.names and imported.module != module:
                    return _definition(p, imported.module, name, hops - 1)
    return None


def _rebindings(p: _Plan, names: list[str], search: Searcher | None) -> None:
    """Lines outside the tests that assign to a name the failure names (`mod.f = other`): a
    monkey-patch or a stale override is what a test often trips on."""
    if search is None:
        return
    narrow = p.params.narrow_context_lines
    for name in dict.fromkeys(names):
        for path, line in search(rf"(^|[\w.]\.){name}\s*=[^=]")[:_MAX_REBINDINGS]:
            source = p.read(path) if not is_test_file(path) else None
            if source is not None:
                p.add(PackCandidate(path, f"assigns {name} (named in the failure; search)",
                                max(1, line - narrow), min(source.total, line + narrow)))


def _imports(p: _Plan, path: str) -> None:
    for imported in imported_modules("\n".join(p.sources[path].lines), path):
        files = resolve(imported, p.workspace)
        top = imported.module.split(".")[0]
        if not files and top not in sys.stdlib_module_names and top != "__future__":
            p.exclude(candidate_paths(imported.module)[0],
                      f"not in workspace (third-party or missing: {imported.module}, "
                      f"imported by {path})")
        for target in files:
            if target == path or p.read(target) is None:
                continue
            why = f"imported by {path} (line {imported.line})"
            p.add(PackCandidate(target, why))
            p.add(PackCandidate(target, f"{why}: signatures only", signatures=True))


def _outside(path: str) -> str | None:
    """Why a printed path is outside the workspace, None when it may be inside."""
    if "site-packages/" in path or "dist-packages/" in path:
        return "site-packages"
    if path.startswith("/") or path.startswith("<"):
        return "standard library" if "/lib/python" in path else "outside the workspace"
    if path.startswith("../"):
        return "outside the workspace"
    return None


def _frame_candidates(source: Source, line: int, params: PlanParams) -> list[PackCandidate]:
    where = f"traceback frame (line {line})"
    span = _enclosing_function(source, line)
    out = []
    if span is not None and span[1] - span[0] + 1 <= params.cheap_function_lines:
        out.append(PackCandidate(source.path, f"{where}: whole function", *span))
    else:
        wide = params.frame_context_lines
        out.append(PackCandidate(source.path, f"{where}: ±{wide} lines", max(1, line - wide),
                             min(source.total, line + wide)))
    narrow = params.narrow_context_lines
    wide_start, wide_end = out[0].start or 1, out[0].end or source.total
    start, end = max(wide_start, line - narrow), min(wide_end, line + narrow)
    if (start, end) != (wide_start, wide_end):  # within the wider range: a fallback only
        out.append(PackCandidate(source.path, f"{where}: ±{narrow} lines", start, end))
    return out


def _tree(source: Source) -> ast.Module | None:
    try:
        return ast.parse("\n".join(source.lines))
    except (SyntaxError, ValueError):
        return None


def _functions(tree: ast.Module) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """Every def with its qualified name (`Class::method` style, as pytest ids write it)."""
    out: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append((child, prefix + child.name))
                walk(child, prefix + child.name + "::")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + "::")

    walk(tree, "")
    return out


def _span(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return start, node.end_lineno or node.lineno


def _enclosing_function(source: Source, line: int) -> tuple[int, int] | None:
    """The innermost def whose lines hold `line`."""
    tree = _tree(source)
    if tree is None:
        return None
    spans = [_span(node) for node, _ in _functions(tree)]
    holding = [s for s in spans if s[0] <= line <= s[1]]
    return min(holding, key=lambda s: s[1] - s[0]) if holding else None


def _function_span(source: Source, test: FailingTest) -> tuple[int, int] | None:
    tree = _tree(source)
    if tree is None:
        return None
    qualified = test.name.split("[")[0]
    functions = _functions(tree)
    for node, name in functions:
        if name == qualified:
            return _span(node)
    for node, _ in functions:
        if node.name == test.function:
            return _span(node)
    return None


def _top_level_span(source: Source, name: str) -> tuple[int, int] | None:
    tree = _tree(source)
    for node in tree.body if tree is not None else []:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                and node.name == name:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            return start, node.end_lineno or node.lineno
    return None


def _header_end(source: Source) -> int:
    """The last line before the first top-level def/class (0 if the file starts with one)."""
    tree = _tree(source)
    if tree is None:
        return 0
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            end = start - 1
            while end > 0 and not source.lines[end - 1].strip():
                end -= 1
            return end
    return len(source.lines)
