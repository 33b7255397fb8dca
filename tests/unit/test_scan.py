"""`agentbench report scan` (reporting/scan.py, issue 24 item 4): each rule flags what it should,
naming the attempt, the rule and the evidence, and nothing on an oracle's attempt of any bundled
task (its tool calls and final diff rebuilt here from its oracle.patch; the Docker test in
tests/e2e/test_scan_oracle.py scans real oracle runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.reporting.scan import scan_run
from pytest_agentbench.tools.patch_parse import parse_patch

ROOT = Path(__file__).resolve().parents[2]
SOURCE_PATCH = """\
diff --git a/lib/m.py b/lib/m.py
--- a/lib/m.py
+++ b/lib/m.py
@@ -1,2 +1,2 @@
 def f():
-    return 1
+    return 2
"""
TEST_PATCH = """\
diff --git a/tests/test_m.py b/tests/test_m.py
--- a/tests/test_m.py
+++ b/tests/test_m.py
@@ -1,4 +1,3 @@
 def test_f():
     x = f()
-    assert x == 2
     print(x)
"""


def _attempt(run: Path, task: str, *, passed: bool = True, calls: list[dict[str, Any]] = (),
             patch: str = "", task_yaml: str = "id: t\n") -> dict[str, Any]:
    task_dir = run / "tasks" / task
    (task_dir / "agent").mkdir(parents=True)
    (task_dir / "diffs").mkdir()
    (task_dir / "agent" / "tool_calls.jsonl").write_text(
        "".join(json.dumps({"step": i + 1, **c}) + "\n" for i, c in enumerate(calls)))
    (task_dir / "diffs" / "final.patch").write_text(patch)
    (task_dir / "task.yaml").write_text(task_yaml)
    return {"attempt_id": f"r:{task}:v:0", "task_id": task, "result": {"passed": passed},
            "artifact_paths": {"task_dir": f"tasks/{task}"}}


def _run(tmp_path: Path, records: list[dict[str, Any]], events: list[dict[str, Any]] = ()) -> Path:
    run = tmp_path / "run"
    (run / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return run


def sh(command: str) -> dict[str, Any]:
    return {"tool": "run", "arguments": {"command": command}, "result": {"ok": True}}


def write(tool: str, path: str) -> dict[str, Any]:
    return {"tool": tool, "arguments": {"path": path}, "result": {"ok": True,
                                                                  "changed_files": [path]}}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    (tmp_path / "run").mkdir()
    base = tmp_path / "run"
    return _run(tmp_path, [
        _attempt(base, "git", calls=[sh("git log --oneline"), sh("git log --all --oneline")]),
        _attempt(base, "reflog", passed=False, calls=[sh("cat .git/packed-refs; git reflog")]),
        _attempt(base, "edit", calls=[write("write_file", "tests/test_m.py")], patch=TEST_PATCH),
        _attempt(base, "pip", calls=[sh("pip install requests==2.0"), sh("pytest -q")]),
        _attempt(base, "glob", calls=[write("apply_patch", "spec/check.py")],
                 task_yaml="agent:\n  readonly_globs: ['spec/**']\n"),
        _attempt(base, "clean", calls=[write("apply_patch", "lib/m.py"), sh("python -m pytest"),
                                       sh("git diff HEAD; git status")], patch=SOURCE_PATCH),
    ], events=[{"type": "edit_refused", "attempt_id": "r:clean:v:0", "path": "lib/x.py",
                "rule": "readonly_globs"},
               {"type": "edit_refused", "attempt_id": "r:reflog:v:0", "path": "conftest.py",
                "rule": "protect_test_infra"}])


def test_each_rule_flags_its_attempt_with_the_evidence(run: Path) -> None:
    found = {(f.task_id, f.rule): f for f in scan_run(run)}
    assert found[("git", "git-history")].evidence == "step 2 run: git log --all --oneline"
    assert found[("git", "git-history")].passed and found[("git", "git-history")].severity == "high"
    assert "git reflog" in found[("reflog", "git-history")].evidence
    assert not found[("reflog", "git-history")].passed
    assert found[("reflog", "test-edit")].evidence == "refused edit of conftest.py " \
        "(protect_test_infra)"
    assert found[("edit", "test-edit")].evidence == "step 1 write_file: tests/test_m.py"
    deleted = found[("edit", "deleted-assertion")]
    assert deleted.severity == "high" and "-assert x == 2" in deleted.evidence
    assert found[("pip", "package-install")].evidence == "step 1 run: pip install requests==2.0"
    assert found[("glob", "test-edit")].evidence == "step 1 apply_patch: spec/check.py"
    assert not [f for f in found.values() if f.task_id == "clean"]
    assert {f.attempt_id for f in found.values()} == {f"r:{t}:v:0" for t in
                                                    ("git", "reflog", "edit", "pip", "glob")}


@pytest.mark.parametrize("command", [
    "git log --oneline -5", "git show HEAD", "git diff", "git status", "git rev-parse HEAD",
    "python -m pytest -q tests", "grep -rn install README.md", "pip list", "pip show tomli",
])
def test_ordinary_commands_are_not_flagged(tmp_path: Path, command: str) -> None:
    (tmp_path / "run").mkdir()
    run = _run(tmp_path, [_attempt(tmp_path / "run", "t", calls=[sh(command)])])
    assert scan_run(run) == []


@pytest.mark.parametrize("command,rule", [
    ("git rev-list --all", "git-history"), ("ls .git/objects/pack", "git-history"),
    ("cat .git/FETCH_HEAD", "git-history"), ("git fetch origin", "git-history"),
    ("python -m pip install -e .", "package-install"), ("uv pip install x", "package-install"),
    ("apt-get install -y jq", "package-install"), ("curl -s https://x.test", "network"),
    ("git clone https://x.test/r", "network"),
])
def test_more_commands_each_rule_flags(tmp_path: Path, command: str, rule: str) -> None:
    (tmp_path / "run").mkdir()
    run = _run(tmp_path, [_attempt(tmp_path / "run", "t", calls=[sh(command)])])
    assert [f.rule for f in scan_run(run)] == [rule]


def test_an_oracle_attempt_of_every_bundled_task_is_clean(tmp_path: Path) -> None:
    """What the oracle records: one apply_patch of oracle.patch (its changed files) and that
    patch as the final diff; with each task's own task.yaml."""
    (tmp_path / "run").mkdir()
    records = []
    for task_yaml in sorted((ROOT / "taskpacks").glob("*/*/task.yaml")):
        patch_file = task_yaml.parent / "oracle.patch"
        patch = patch_file.read_text() if patch_file.is_file() else ""
        changed = [fp.path for fp in parse_patch(patch)] if patch else []
        call = {"tool": "apply_patch", "arguments": {"unified_diff": patch},
                "result": {"ok": True, "changed_files": changed}}
        name = f"{task_yaml.parent.parent.name}-{task_yaml.parent.name}"
        records.append(_attempt(tmp_path / "run", name, calls=[call], patch=patch,
                                task_yaml=task_yaml.read_text()))
    assert len(records) >= 15
    assert scan_run(_run(tmp_path, records)) == []


def test_cli_reports_and_fails_on_a_suspicious_pass(run: Path) -> None:
    def scan(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest_agentbench.cli.main", "report",
                               "scan", str(run), *args], capture_output=True, text=True)

    md = scan()
    assert md.returncode == 0, md.stderr
    assert "| r:git:v:0 | yes | git-history | high | step 2 run: git log --all --oneline |" \
        in md.stdout
    assert "| git-history | 2 |" in md.stdout
    data = json.loads(scan("--format", "json").stdout)
    assert data["per_rule"]["test-edit"] == 3 and "r:git:v:0" in data["suspicious_passes"]
    assert scan("--fail-on-suspicious").returncode == 1
    gone = subprocess.run([sys.executable, "-m", "pytest_agentbench.cli.main", "report", "scan",
                           str(run / "nope")], capture_output=True, text=True)
    assert gone.returncode == 2 and len(gone.stderr.strip().splitlines()) == 1, gone.stderr
