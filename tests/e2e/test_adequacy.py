"""Test adequacy (issue 24 item 3) through the real pipeline: one oracle attempt, then each mutant
of its patch graded in a fresh sandbox. A deliberately weak task (its test checks only that
`area` returns something) is flagged both by the exploit agent's hard-coding try and by its
adequacy score; the same task with a real test is not; a bundled task's score in Docker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from pytest_agentbench.core.attempt_config import SharedAttemptConfig
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.run.adequacy import run_adequacy
from pytest_agentbench.run.validation import AdequacyOptions, validate_task
from pytest_agentbench.sandbox.local import LocalSandboxFactory
from pytest_agentbench.tasks.loader import load_task
from tests.adversarial.test_exploit_agent import STRONG_TEST, shapes_task

ROOT = Path(__file__).resolve().parents[2]
RETURNS_SOMETHING = ("from shapes import area\n\n\ndef test_area():\n"
                     "    assert area(2, 3)\n")


def _shared(tmp_path: Path, **extra: Any) -> SharedAttemptConfig:
    return SharedAttemptConfig(run_id="v", run_dir=tmp_path / "run", work_root=tmp_path / "work",
                               variant="v", variant_config_hash="v", harness_version="test",
                               **extra)


def test_a_weak_task_is_flagged_by_hard_coding_and_by_its_adequacy(tmp_path: Path) -> None:
    sandboxes = LocalSandboxFactory()
    try:
        result = validate_task(load_task(shapes_task(tmp_path, RETURNS_SOMETHING)),
                               _shared(tmp_path), sandboxes, MirrorCache(tmp_path / "git"),
                               exploits=("hard-code",), adequacy=AdequacyOptions())
    finally:
        sandboxes.close_all()
    assert result.ok, result.detail  # warnings, never a rejection
    adequacy = result.adequacy
    assert adequacy is not None and adequacy.flagged, adequacy
    # `return width * height`: dropping it is caught (None is falsy), `*` -> `/` is not
    assert adequacy.score == 0.5 and adequacy.caught == 1, adequacy.line()
    (survivor,) = adequacy.survivors
    assert survivor.label == "shapes.py:2 arithmetic: `*` -> `/`"
    hard_code, low = result.warnings
    assert "hard-code passes" in hard_code and "tests/test_shapes.py::test_area" in hard_code
    assert low.startswith("weak tests: adequacy 0.50 < 0.60; the tests pass with shapes.py:2 "
                          "arithmetic"), low


def test_the_same_task_with_a_real_test_is_not_flagged(tmp_path: Path) -> None:
    sandboxes = LocalSandboxFactory()
    try:
        task = load_task(shapes_task(tmp_path, STRONG_TEST))
        adequacy = run_adequacy(task, _shared(tmp_path), sandboxes, MirrorCache(tmp_path / "g"))
    finally:
        sandboxes.close_all()
    assert adequacy.score == 1.0 and adequacy.caught == 2 and not adequacy.flagged, adequacy
    assert adequacy.line().startswith("adequacy 1.00 (2/2 mutants caught, ")


def test_validate_tasks_prints_and_writes_the_adequacy(tmp_path: Path) -> None:
    shapes_task(tmp_path, RETURNS_SOMETHING)
    out = tmp_path / "v.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_agentbench.cli.main", "validate-tasks", "--suite", "synth",
         "--taskpacks", str(tmp_path / "taskpacks"), "--run", "--sandbox", "local",
         "--exploit", "none", "--adequacy", "--adequacy-threshold", "0.75", "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert any(line.strip().startswith("adequacy 0.50 (1/2 mutants caught, ") for line in lines)
    assert any(line.startswith("WARN    shapes: weak tests: adequacy 0.50 < 0.75")
               for line in lines), lines
    assert lines[-1] == "1 accepted, 0 rejected, 1 with weak tests"
    data = json.loads(out.read_text())["tasks"]["shapes"]
    assert data["ok"] and data["exploits"] == []
    assert data["adequacy"]["score"] == 0.5 and data["adequacy"]["flagged"]
    assert [m["caught"] for m in data["adequacy"]["mutants"]] == [True, False]


def test_adequacy_options_need_run_and_adequacy(tmp_path: Path) -> None:
    shapes_task(tmp_path, RETURNS_SOMETHING)
    base = [sys.executable, "-m", "pytest_agentbench.cli.main", "validate-tasks", "--suite",
            "synth", "--taskpacks", str(tmp_path / "taskpacks")]
    for extra in (["--adequacy"], ["--run", "--adequacy-max", "3"],
                  ["--run", "--adequacy", "--adequacy-threshold", "2"]):
        proc = subprocess.run(base + extra, capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stdout == "", (extra, proc.stdout)
        last = proc.stderr.strip().splitlines()[-1]  # argparse's usage may come before it
        assert last.startswith("agentbench validate-tasks") and "--adequacy" in last, last


def test_a_bundled_task_in_docker(tmp_path: Path, docker_sandboxes: Any) -> None:
    """fix-title-case-small-words: its test uses only some of the small words, so blanking the
    others survives; the score and each mutant's verdict are in the attempt's environment."""
    from pytest_agentbench.run.hostenv import owner_uid
    from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE

    shared = _shared(tmp_path, image=DEFAULT_IMAGE, owner_uid=owner_uid("docker"))
    task = load_task(ROOT / "taskpacks/custom-dev/fix-title-case-small-words/task.yaml")
    adequacy = run_adequacy(task, shared, docker_sandboxes, MirrorCache(tmp_path / "git"))
    assert (adequacy.caught, len(adequacy.survivors)) == (3, 4), adequacy.line()
    assert adequacy.flagged
    assert all(m.caught is not None for m in adequacy.mutants)
    (environment,) = (tmp_path / "run").rglob("environment.json")
    env = json.loads(environment.read_text())
    assert env["adequacy"]["caught"] == 3 and len(env["adequacy"]["mutants"]) == 7
