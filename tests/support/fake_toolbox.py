"""A stand-in toolbox over a temporary directory for the model-calling agents' unit tests
(llm_v0, subagents, context_packer), and the one-bug task most of them fix (mathx.py's mean
divides by n - 1). The real toolbox is tested in test_tools.py; this one lets a test exercise an
agent's loop, stop conditions, budgets and accounting without a sandbox.

`DirToolbox.call(name, arguments) -> ToolResult` answers as the real one does where the agents
look: an unknown tool or wrong arguments are errors of their type, `apply_patch` replaces the
hunk's old text exactly once (PATCH_REJECTED when it is not there), and `run` is ok when the
command ran to completion, its verdict the exit code of `grade(root)`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agentbench.schemas.task import TaskSpec
from pytest_agentbench.tools.results import ErrorType, ToolResult

# -- the one-bug task -----------------------------------------------------------------------------
FAILING = "python -m pytest -q tests/test_mathx.py"
BUGGY = "def mean(xs):\n    return sum(xs) / (len(xs) - 1)\n"
FIXED = "def mean(xs):\n    return sum(xs) / len(xs)\n"
FIX = ("--- a/mathx.py\n+++ b/mathx.py\n@@ -1,2 +1,2 @@\n def mean(xs):\n"
       "-    return sum(xs) / (len(xs) - 1)\n+    return sum(xs) / len(xs)\n")
FAIL_OUT = ("F\n=== FAILURES ===\nE   assert 3.0 == 2.0\n=== short test summary info ===\n"
            "FAILED tests/test_mathx.py::test_mean - assert 3.0 == 2.0\n1 failed in 0.03s\n")
PASS_OUT = "1 passed in 0.02s\n"
TASK = TaskSpec.model_validate({
    "task_spec_version": 1, "id": "fix-mean", "suite": "unit",
    "description": "mean() divides by n - 1",
    "repo": {"url": "repo.bundle", "commit": "abcdef1"},
    "validation": {"failing_command": FAILING, "passing_command": "python -m pytest -q tests"},
})

Grade = Callable[[Path], tuple[int, str]]  # the workspace -> (exit code, output) of `run`


def grade_mean(root: Path) -> tuple[int, str]:
    """`run` of the one-bug task: passes once mathx.py divides by len(xs)."""
    fixed = "/ len(xs)\n" in (root / "mathx.py").read_text()
    return (0, PASS_OUT) if fixed else (1, FAIL_OUT)


class DirToolbox:
    """list_files, read_file, search, write_file, apply_patch, run and finish over `root`; every
    call is kept in `calls` as (name, arguments)."""

    def __init__(self, root: Path, grade: Grade = grade_mean) -> None:
        self.root = root
        self.grade = grade
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        self.calls.append((name, arguments))
        handler = getattr(self, f"_{name}", None)
        if handler is None:
            result = ToolResult.error(ErrorType.UNKNOWN_TOOL, f"unknown tool {name!r}")
        else:
            try:
                result = handler(**arguments)
            except TypeError as exc:
                result = ToolResult.error(ErrorType.INVALID_ARGUMENTS, str(exc))
        result.tool = name
        return result

    def _files(self, glob: str = "*") -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob(glob)
                      if p.is_file() and "__pycache__" not in p.parts)

    def _list_files(self, glob: str | None = None, root: str = ".") -> ToolResult:
        files = self._files(glob or "*")
        return ToolResult(ok=True, stdout="\n".join(files), data={"files": files})

    def _read_file(self, path: str) -> ToolResult:
        target = self.root / path
        if not target.is_file():
            return ToolResult.error(ErrorType.NOT_FOUND, f"no such file: {path}")
        text = target.read_text()
        n = text.count("\n")
        return ToolResult(ok=True, stdout=text, total_lines=n, returned_line_range=(1, n),
                          data={"path": path})

    def _search(self, query: str, **_: Any) -> ToolResult:
        lines = [f"{path}:{i}:{line}" for path in self._files()
                 for i, line in enumerate((self.root / path).read_text().splitlines(), 1)
                 if query in line]
        return ToolResult(ok=True, stdout="\n".join(lines))

    def _write_file(self, path: str, content: str) -> ToolResult:
        target = self.root / path
        if target.exists() and target.read_text() == content:
            return ToolResult(ok=True, stdout=f"{path} unchanged (same content)")
        target.write_text(content)
        return ToolResult(ok=True, stdout=f"wrote {path}", changed_files=[path])

    def _apply_patch(self, unified_diff: str) -> ToolResult:
        lines = unified_diff.splitlines(keepends=True)
        path = next(ln[6:].strip() for ln in lines if ln.startswith("+++ b/"))
        old = "".join(ln[1:] for ln in lines if ln[:1] in "- " and not ln.startswith("---"))
        new = "".join(ln[1:] for ln in lines if ln[:1] in "+ " and not ln.startswith("+++"))
        text = (self.root / path).read_text()
        if old not in text:
            return ToolResult.error(ErrorType.PATCH_REJECTED, "hunk 1 does not match")
        (self.root / path).write_text(text.replace(old, new, 1))
        return ToolResult(ok=True, stdout=f"patched {path}", changed_files=[path])

    def _run(self, command: str, timeout_sec: float | None = None) -> ToolResult:
        code, out = self.grade(self.root)
        return ToolResult(ok=True, stdout=out, exit_code=code)

    def _finish(self, summary: str) -> ToolResult:
        return ToolResult(ok=True, stdout="finished", data={"finish": True, "summary": summary})
