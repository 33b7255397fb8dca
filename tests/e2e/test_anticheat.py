"""Agents that try to fake a pass must fail: the grade comes from the diff, tested afresh.

Each test runs a scripted agent (a list of tool calls) through pytest and the Docker sandbox on a
bundled task, and asserts on the attempt record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]
FORCE_PASS_CONFTEST = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    report = outcome.get_result()\n"
    "    report.outcome = 'passed'\n"
)


def run_scripted(tmp_path: Path, task: str, calls: list[dict]) -> dict:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(calls))
    variant = tmp_path / "cheater.yaml"
    variant.write_text(yaml.safe_dump({"name": "cheater", "agent": "scripted",
                                       "params": {"script": str(script)}}))
    out = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
         "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
         f"--agentbench-out={out}", "-k", task, f"--agentbench-variant={variant}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    (run_dir,) = run_dirs(out)
    lines = (run_dir / "attempts.jsonl").read_text().splitlines()
    assert len(lines) == 1, proc.stdout[-2000:]
    return json.loads(lines[0])


def test_conftest_hidden_by_gitignore_does_not_pass(tmp_path: Path) -> None:
    record = run_scripted(tmp_path, "fix-mean-off-by-one", [
        {"tool": "write_file", "arguments": {"path": "tests/conftest.py",
                                             "content": FORCE_PASS_CONFTEST}},
        {"tool": "write_file", "arguments": {"path": "tests/.gitignore",
                                             "content": "conftest.py\n.gitignore\n"}},
        # in the agent's own workspace the trick works ...
        {"tool": "run", "arguments": {"command": "python -m pytest -q -p no:cacheprovider tests"}},
    ])
    # ... but the hidden files are not part of the diff, so the fresh scoring copy fails
    assert record["result"]["passed"] is False
    assert record["result"]["failure_reason"] == "TESTS_FAILED"


def test_poisoning_the_environment_is_refused(tmp_path: Path) -> None:
    site = "/env/lib/python3.11/site-packages"
    record = run_scripted(tmp_path, "fix-mean-off-by-one", [
        {"tool": "run", "arguments": {"command": f"mkdir -p {site} && echo 'import os; "
                                                 f"os._exit(0)' > {site}/zz_cheat.pth"}},
    ])
    assert record["result"]["passed"] is False
    assert record["result"]["failure_reason"] == "TESTS_FAILED"


def test_fake_pass_output_does_not_pass(tmp_path: Path) -> None:
    record = run_scripted(tmp_path, "fix-mean-off-by-one", [
        {"tool": "write_file", "arguments": {
            "path": "tests/conftest.py",
            "content": "def pytest_unconfigure(config):\n    print('1 passed in 0.01s')\n"
                       "    print('PASSED tests/test_mathx.py::test_mean')\n"}},
    ])
    assert record["result"]["passed"] is False


def test_moving_read_only_tests_away_is_not_allowed(tmp_path: Path) -> None:
    record = run_scripted(tmp_path, "fix-title-case-small-words", [
        {"tool": "run", "arguments": {"command": "mkdir -p attic && git mv tests/test_text.py "
                                                 "attic/test_text.py"}},
    ])
    assert record["result"]["passed"] is False
    assert record["result"]["failure_reason"] == "TOOL_ERROR"
    assert record["result"]["sub_reason"] == "EDIT_NOT_ALLOWED"


def test_unreadable_workspace_is_the_agents_failure(tmp_path: Path) -> None:
    record = run_scripted(tmp_path, "fix-mean-off-by-one", [
        {"tool": "run", "arguments": {"command": "touch junk && chmod 000 junk"}},
    ])
    assert record["result"]["passed"] is False
    assert record["pytest_outcome"] == "failed"
    assert record["result"]["failure_reason"] == "TOOL_ERROR"
