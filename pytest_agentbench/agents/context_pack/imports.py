"""Which workspace files a Python module imports (one level: the module's own import lines).

`import a.b` and `from a import b` resolve to `a/b.py`, `a/b/__init__.py` (b a submodule) or
`a.py`, `a/__init__.py` (b a name in a), also under `src/`; relative imports resolve against the
importing file's package. Only files in the given workspace listing count: the rest is
third-party, the standard library or missing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Container
from dataclasses import dataclass

_IMPORT_LINE = re.compile(r"^\s*(?:from\s+(?P<from>\.*[\w.]*)\s+import\s+(?P<names>[\w ,()*]+)"
                          r"|import\s+(?P<mods>[\w., ]+))", re.M)
SOURCE_ROOTS = ("", "src/")


@dataclass(frozen=True)
class Imported:
    """One imported module: its dotted name, the first line that imports it, and the names taken
    from it (`from m import a, b`), which may be submodules."""

    module: str
    line: int
    names: tuple[str, ...] = ()


def imported_modules(source: str, path: str) -> list[Imported]:
    """The modules `source` (the file at workspace path `path`) imports, in order, no repeats.
    A file that does not parse is scanned line by line."""
    found: list[Imported] = []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return _scan(source, path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Imported(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module or "", node.level, path)
            if base:
                found.append(Imported(base, node.lineno, tuple(a.name for a in node.names)))
    found.sort(key=lambda i: i.line)
    return _unique(found)


def resolve(imported: Imported, workspace: Container[str]) -> list[str]:
    """The workspace files `imported` refers to: the module itself, and for `from m import x`
    each x that is a submodule (a file) rather than a name in m."""
    files: list[str] = []
    for name in imported.names:
        if name != "*":
            files += module_files(f"{imported.module}.{name}", workspace)[:1]
    own = module_files(imported.module, workspace)[:1]
    if not files or own:
        files = own + files
    return list(dict.fromkeys(files))


def module_files(module: str, workspace: Container[str]) -> list[str]:
    """The files in `workspace` a dotted module name could be, best first."""
    return [p for p in candidate_paths(module) if p in workspace]


def candidate_paths(module: str) -> list[str]:
    base = module.replace(".", "/")
    return [f"{root}{base}{tail}" for root in SOURCE_ROOTS for tail in (".py", "/__init__.py")]


def module_of(path: str) -> str | None:
    """The dotted module name of a workspace .py path (`src/` stripped), None for other files."""
    if not path.endswith(".py"):
        return None
    name = path.removeprefix("src/").removesuffix(".py").removesuffix("/__init__")
    return name.replace("/", ".") or None


def _absolute(module: str, level: int, path: str) -> str:
    if level == 0:
        return module
    package = (module_of(path) or "").split(".")
    if not path.endswith("/__init__.py"):
        package = package[:-1]
    if level - 1 > len(package):
        return ""
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _scan(source: str, path: str) -> list[Imported]:
    found: list[Imported] = []
    for match in _IMPORT_LINE.finditer(source):
        line = source.count("\n", 0, match.start()) + 1
        if match["mods"]:
            found += [Imported(m.split(" as ")[0].strip(), line)
                      for m in match["mods"].split(",") if m.strip()]
        else:
            raw = match["from"]
            level = len(raw) - len(raw.lstrip("."))
            base = _absolute(raw.lstrip("."), level, path)
            names = tuple(n.split(" as ")[0].strip() for n in
                          match["names"].strip("() ").split(",") if n.strip())
            if base:
                found.append(Imported(base, line, names))
    return _unique(found)


def _unique(found: list[Imported]) -> list[Imported]:
    seen: set[tuple[str, tuple[str, ...]]] = set()
    out = []
    for item in found:
        key = (item.module, item.names)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out
