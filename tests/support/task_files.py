"""Task files the loader's tests write (tests/unit/task_loader/): a minimal valid task.yaml,
changed as a test needs, under taskpacks/<suite>/<name>/ of the current directory."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from pytest_agentbench.tasks.loader import TaskProblem

SUITE = "custom-dev"
MINIMAL: dict[str, Any] = {
    "task_spec_version": 1,
    "id": "t1",
    "suite": SUITE,
    "repo": {"url": "https://example.invalid/repo.git", "commit": "abcdef1"},
    "validation": {"failing_command": "pytest -q", "passing_command": "pytest -q"},
}
FILE = f"taskpacks/{SUITE}/t1/task.yaml"


def task_data(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(MINIMAL)
    data.update(changes)
    return data


def write_text(name: str, text: str, suite: str = SUITE) -> Path:
    path = Path("taskpacks") / suite / name / "task.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_task(name: str, data: Any, suite: str = SUITE) -> Path:
    return write_text(name, yaml.safe_dump(data, sort_keys=False), suite)


def only_line(result_problems: list[TaskProblem]) -> str:
    lines = [str(problem) for problem in result_problems]
    assert len(lines) == 1, lines
    return lines[0]
