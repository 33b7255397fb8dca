"""A tiny taskpack in pytester's directory and in-process runs of the plugin on it.

`Pack` is a taskpacks/ directory with one suite and one tiny local git repository; its tasks'
commands are shell one-liners, so an attempt takes milliseconds. `run_suite` runs pytest with the
plugin and the local sandbox in pytester's process; the other helpers read what a run wrote.
Used by tests/e2e/plugin_synthetic/ and the adversarial input and scoring tests.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pandas  # noqa: F401 - see below
import pytest

from pytest_agentbench.reporting.runs import newest_run
from pytest_agentbench.schemas.records import AttemptRecord
from tests.support.run_dirs import run_dirs as dirs_under

# pandas (and numpy under it) is imported here, in the test process, on purpose: pytester's
# in-process runs drop the modules they imported when they end, and numpy's C core cannot be
# loaded twice in one process ("cannot load module more than once per process"), so the run's
# reports would fail from the second in-process run on.
SUITE = "synth"

ORACLE_PATCH = """\
diff --git a/value.txt b/value.txt
--- a/value.txt
+++ b/value.txt
@@ -1 +1 @@
-bad
+good
"""
FIXED = "grep -qx good value.txt"
# Fails on its first run and passes on every later one: a deterministic flaky baseline.
FLIP_FLOP = "if [ -e .ran ]; then exit 0; fi; touch .ran; exit 1"


# --------------------------------------------------------------------------- builders


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


class Pack:
    """A taskpacks/ directory under pytester's path with one suite and one tiny repository."""

    def __init__(self, root: Path) -> None:
        self.root = root / "taskpacks"
        repo = self.root / "_repos" / "tiny"
        repo.mkdir(parents=True)
        git(repo, "init", "-q")
        (repo / "value.txt").write_text("bad\n")
        git(repo, "add", "value.txt")
        git(repo, "commit", "-q", "-m", "broken")
        self.commit = git(repo, "rev-parse", "HEAD")

    def write(self, name: str, text: str, suite: str = SUITE) -> Path:
        path = self.root / suite / name / "task.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def task(
        self,
        task_id: str,
        *,
        failing: str = FIXED,
        passing: str = FIXED,
        labels: tuple[str, ...] = (),
        quarantine: str | None = None,
        oracle: bool = True,
        suite: str = SUITE,
        dirname: str | None = None,
    ) -> Path:
        lines = [
            "task_spec_version: 1",
            f"id: {task_id}",
            f"suite: {suite}",
            f"labels: [{', '.join(labels)}]",
            "repo:",
            "  url: ../../_repos/tiny",
            f"  commit: {self.commit}",
            "environment:",
            "  timeout_sec: 120",
            "  tool_timeout_sec: 30",
            "validation:",
            f"  failing_command: {json.dumps(failing)}",
            f"  passing_command: {json.dumps(passing)}",
        ]
        if quarantine:
            lines.append(f"quarantine: {json.dumps(quarantine)}")
        path = self.write(dirname or task_id, "\n".join(lines) + "\n", suite)
        if oracle:
            (path.parent / "oracle.patch").write_text(ORACLE_PATCH)
        return path


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """In-process (several times faster); xdist workers are subprocesses either way."""
    return pytester.runpytest_inprocess(
        "--agentbench-sandbox", "local", "-p", "no:cacheprovider", *args
    )


def run_suite(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run(pytester, "--agentbench-suite", SUITE, *args)


def run_dirs(pytester: pytest.Pytester) -> list[Path]:
    root = pytester.path / "reports" / "runs"
    return dirs_under(root)


def newest_run_dir(pytester: pytest.Pytester) -> Path:
    """The run that started last (run.json's `started_at`): two runs in one second have names
    that do not sort by time (the stamp is to the second, then a random suffix)."""
    newest = newest_run(pytester.path / "reports" / "runs")
    assert newest is not None, run_dirs(pytester)
    return newest


def only_run_dir(pytester: pytest.Pytester) -> Path:
    dirs = run_dirs(pytester)
    assert len(dirs) == 1, dirs
    return dirs[0]


def attempts(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "attempts.jsonl"
    if not path.exists():
        return []
    lines = path.read_text("utf-8").splitlines()
    for line in lines:
        AttemptRecord.model_validate_json(line)
    return [json.loads(line) for line in lines]


def by_task(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {r["task_id"]: r for r in records}
    assert len(out) == len(records), "a task was recorded twice"
    return out


def output(result: pytest.RunResult) -> str:
    return result.stdout.str() + "\n" + result.stderr.str()


def sections(result: pytest.RunResult, kind: str) -> dict[str, list[str]]:
    """Body lines of each `____ ERROR at setup of <what> <name> ____` (or FAILURES) section."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    header = re.compile(rf"^_+ (?:{kind}) (\S+) _+$")
    for line in result.stdout.lines:
        match = header.match(line)
        if match:
            current = found.setdefault(match.group(1), [])
        elif re.match(r"^(_{3,}|={3,}|-{3,}) ", line):
            current = None
        elif current is not None and line.strip() and not line.startswith("[gw"):
            current.append(line)
    return found
