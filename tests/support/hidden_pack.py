"""A taskpack with one task made from history, as `agentbench harvest` makes them: the task's
commit is the parent of a commit that fixes `calc.add` and changes the tests; the fix is the
oracle and the test part is hidden (`validation.hidden_tests: tests.patch`).

The test part modifies an existing test file, adds a new one and adds binary test data, each
holding MARKER, which nothing else in the repository's history up to the task's commit does. The
repository the task points at holds the fix commit too (as a real clone would): only the
checkout decides what the agent gets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.run_dirs import run_dirs

SUITE = "hidden"
TASK_ID = "calc-add-hidden"
MARKER = "HIDDENMARK" + "_q7z3"  # never written whole in a script an agent could read
CALC_BROKEN = "def add(a, b):\n    return a - b\n\n\ndef double(a):\n    return a * 2\n"
CALC_FIXED = CALC_BROKEN.replace("a - b", "a + b")
TEST_CALC_BEFORE = "from calc import double\n\n\ndef test_double():\n    assert double(2) == 4\n"
TEST_CALC_AFTER = TEST_CALC_BEFORE + (
    "\n\ndef test_add_small():\n"
    f"    assert __import__('calc').add(2, 3) == 5, {MARKER + '_modified'!r}\n"
)
TEST_NEW = (
    "from pathlib import Path\n\nfrom calc import add\n\n\n"
    "def test_add_data():\n"
    "    data = (Path(__file__).parent / 'data' / 'numbers.bin').read_bytes()\n"
    f"    assert data.startswith(b'\\x00') and b{MARKER!r} in data\n"
    f"    assert add(40, 2) == 42, {MARKER + '_new'!r}\n"
)
BINARY_DATA = b"\x00\x01\xff" + MARKER.encode() + b"\x00\x02" * 40
FAILING = (
    "python -m pytest -q tests/test_calc.py::test_add_small tests/test_new.py::test_add_data"
)
PASSING = "python -m pytest -q tests"
EXPECTED = ["tests/test_calc.py::test_add_small", "tests/test_new.py::test_add_data"]
HIDDEN_PATHS = ["tests/data/numbers.bin", "tests/test_calc.py", "tests/test_new.py"]


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    )
    return out.stdout.strip()


def diff(repo: Path, old: str, new: str, *paths: str) -> bytes:
    """`git diff --binary old new -- paths`, byte for byte (a binary section ends in a blank
    line)."""
    return subprocess.run(["git", "diff", "--binary", old, new, "--", *paths], cwd=repo,
                          check=True, capture_output=True).stdout


def write(path: Path, content: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


@dataclass
class HiddenPack:
    root: Path  # the taskpacks directory
    parent: str  # the task's commit
    fix: str  # the commit that fixed it

    @property
    def task_dir(self) -> Path:
        return self.root / SUITE / TASK_ID


def make_pack(base: Path, **task_fields: Any) -> HiddenPack:
    """taskpacks/_repos/calc (history: broken, then fix + tests) and taskpacks/hidden/<task>."""
    root = base / "taskpacks"
    repo = root / "_repos" / "calc"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    write(repo / "calc.py", CALC_BROKEN)
    write(repo / "tests" / "test_calc.py", TEST_CALC_BEFORE)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "calc with a broken add")
    parent = git(repo, "rev-parse", "HEAD")
    write(repo / "calc.py", CALC_FIXED)
    write(repo / "tests" / "test_calc.py", TEST_CALC_AFTER)
    write(repo / "tests" / "test_new.py", TEST_NEW)
    write(repo / "tests" / "data" / "numbers.bin", BINARY_DATA)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "fix add (#12)")
    fix = git(repo, "rev-parse", "HEAD")
    pack = HiddenPack(root, parent, fix)
    task_dir = pack.task_dir
    task_dir.mkdir(parents=True)
    (task_dir / "oracle.patch").write_bytes(diff(repo, parent, fix, "calc.py"))
    (task_dir / "tests.patch").write_bytes(diff(repo, parent, fix, "tests"))
    spec = {
        "task_spec_version": 1, "id": TASK_ID, "suite": SUITE,
        "description": "add() subtracts instead of adding",
        "repo": {"url": "../../_repos/calc", "commit": parent},
        "environment": {"timeout_sec": 120, "tool_timeout_sec": 60, "cpu_limit": 1,
                        "mem_limit_mb": 1024},
        "validation": {"failing_command": FAILING, "passing_command": PASSING,
                       "expected_failing_tests": EXPECTED, "hidden_tests": "tests.patch"},
        **task_fields,
    }
    (task_dir / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return pack


def run_variant(base: Path, pack: HiddenPack, variant: str, sandbox: str,
                calls: list[dict[str, Any]] | None = None,
                *extra: str) -> tuple[dict[str, Any], Path]:
    """One run of the plugin on the pack (a subprocess with its own HOME and caches) under
    `variant`, or under a scripted agent replaying `calls`; (its one record, its run dir)."""
    out = base / f"runs-{len(list(base.glob('runs-*')))}-{sandbox}"
    if calls is not None:
        script = base / "script.yaml"
        script.write_text(yaml.safe_dump(calls))
        config = base / "scripted.yaml"
        config.write_text(yaml.safe_dump({"name": variant, "agent": "scripted",
                                          "params": {"script": str(script)}}))
        variant = str(config)
    home = base / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env["HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--agentbench-suite", SUITE,
         f"--agentbench-taskpacks={pack.root}", f"--agentbench-out={out}",
         f"--agentbench-sandbox={sandbox}", f"--agentbench-variant={variant}", *extra],
        cwd=base, env=env, capture_output=True, text=True, timeout=600,
    )
    dirs = run_dirs(out)
    assert len(dirs) == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = (dirs[0] / "attempts.jsonl").read_text().splitlines()
    assert len(lines) == 1, proc.stdout[-3000:]
    return json.loads(lines[0]), dirs[0]


def tool_outputs(run_dir: Path) -> list[dict[str, Any]]:
    """The scripted agent's calls with their results, as the harness recorded them."""
    (path,) = run_dir.glob("tasks/**/agent/tool_calls.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]
