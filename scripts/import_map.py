"""The package's shape in numbers: its import graph, the cycles in it, the modules one import
pulls in, and (with --trace) the files that run during one attempt.

    uv run python scripts/import_map.py                      # graph facts, cycles
    uv run python scripts/import_map.py --pulled MODULE      # modules importing MODULE loads
    uv run python scripts/import_map.py --trace              # files one local oracle attempt runs

Every import statement counts for the graph, including those inside functions (a lazy import is
still an arrow a reader follows). --pulled counts what a fresh interpreter really loads.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "pytest_agentbench"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Package modules that `name` imports (absolute or relative, any nesting level)."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                mod = ".".join(anchor + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [
                f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names
            ]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target != PACKAGE:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    modules = package_modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def pulled(module: str) -> list[str]:
    code = (
        f"import sys, {module}\n"
        f"print('\\n'.join(sorted(m for m in sys.modules if m.startswith('{PACKAGE}'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


TRACER = """
import sys, threading, pytest
FILES = {}
def _profile(frame, event, arg):
    if (event == "call" and "/pytest_agentbench/" in frame.f_code.co_filename
            and frame.f_code.co_name != "<module>"):
        depth, f = 0, frame
        while f is not None:
            depth += "/pytest_agentbench/" in f.f_code.co_filename
            f = f.f_back
        name = frame.f_code.co_filename.split("/pytest_agentbench/", 1)[1]
        FILES[name] = min(depth, FILES.get(name, depth))
@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    sys.setprofile(_profile); threading.setprofile(_profile)
    try:
        return (yield)
    finally:
        sys.setprofile(None); threading.setprofile(None)
def pytest_unconfigure(config):
    import os; out = os.path.join(os.path.dirname(config.getoption("--basetemp")), "traced.json")
    with open(out, "w") as f:
        import json; json.dump(FILES, f)
"""


def traced(task: str) -> dict[str, int]:
    """Package files whose code runs while pytest runs one local oracle attempt (item setup,
    call, teardown and the controller's recording of it; no session start or end)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "attempt_tracer.py").write_text(TRACER)
        entry = re.search(r'agentbench = "([\w.]+)"', (ROOT / "pyproject.toml").read_text())
        assert entry, "no pytest11 entry point in pyproject.toml"
        cmd = [sys.executable, "-m", "pytest", "-p", "attempt_tracer", "-p", entry.group(1),
               "-p", "no:cacheprovider", "--agentbench-suite", "custom-dev",
               "--agentbench-sandbox", "local", "--agentbench-variant", "oracle",
               f"--agentbench-out={tmp}/out", f"--basetemp={tmp}/bt", "-k", task, "-q"]
        env = {**os.environ, "PYTHONPATH": tmp, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        if not (Path(tmp) / "traced.json").exists():
            raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
        return dict(json.loads((Path(tmp) / "traced.json").read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pulled", metavar="MODULE")
    parser.add_argument("--trace", metavar="TASK", nargs="?", const="fix-mean-off-by-one")
    parser.add_argument("--json", action="store_true", help="print the edges as JSON")
    args = parser.parse_args()
    edges = graph()
    if args.json:
        print(json.dumps({k: sorted(v) for k, v in edges.items()}, indent=1))
        return
    if args.trace:
        files = traced(args.trace)
        rooms = {name.rpartition("/")[0] or "." for name in files}
        print(f"one local oracle attempt of {args.trace} runs code in {len(files)} package files"
              f" in {len(rooms)} folders")
        for depth in (2, 3, 4, 6):
            near = sum(1 for d in files.values() if d <= depth)
            print(f"  {near} files reached within {depth} package call levels of the item")
        for name, depth in sorted(files.items(), key=lambda kv: (kv[1], kv[0])):
            print(f"  {depth:3d}  {name}")
        return
    if args.pulled:
        loaded = pulled(args.pulled)
        modules = package_modules()
        lines = sum(len(modules[m].read_text().splitlines()) for m in loaded if m in modules)
        total = sum(len(p.read_text().splitlines()) for p in modules.values())
        print(f"importing {args.pulled} loads {len(loaded)} of {len(edges)} package modules,"
              f" {lines} of {total} lines")
        for name in loaded:
            print("  " + name)
        return
    print(f"{len(edges)} modules, {sum(len(v) for v in edges.values())} import arrows")
    found = cycles(edges)
    print(f"{len(found)} import cycles")
    for component in found:
        print("  " + " <-> ".join(component))
    fan_in: dict[str, int] = defaultdict(int)
    for targets in edges.values():
        for t in targets:
            fan_in[t] += 1


if __name__ == "__main__":
    main()
