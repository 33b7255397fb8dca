"""Finding the task files of a run: `taskpacks/<suite>/<task>/task.yaml`, for the suites asked for.

Discovery is sorted and depends only on the files, so every pytest-xdist worker sees the identical
task list. A missing taskpacks directory or suite is a run-level problem; a task directory without
a task.yaml, a bad file or a duplicate id is one problem line for that task, and every other task
still loads.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from pytest_agentbench.tasks.loader import (
    TASK_FILE,
    LoadedTask,
    LoadResult,
    TaskProblem,
    display_path,
    load_reported,
)


def discover(taskpacks: Path, suites: list[str] | None = None) -> LoadResult:
    """Load every `taskpacks/<suite>/*/task.yaml` of the given suites (all suites when None)."""
    if not taskpacks.is_dir():
        problem = TaskProblem(taskpacks, "", "taskpacks directory not found", run_level=True)
        return LoadResult(problems=[problem])
    existing = _suite_names(taskpacks)
    problems: list[TaskProblem] = []
    files: list[Path] = []
    for suite in existing if suites is None else sorted(set(suites)):
        suite_problem = _check_suite(taskpacks, suite, existing)
        if suite_problem is not None:
            problems.append(suite_problem)
            continue
        suite_files, dir_problems = _task_files(taskpacks / suite)
        files.extend(suite_files)
        problems.extend(dir_problems)

    tasks: list[LoadedTask] = []
    first_by_id: dict[str, LoadedTask] = {}
    for path in files:
        task, file_problems = load_reported(path, check_layout=True)
        problems.extend(file_problems)
        if task is None:
            continue
        first = first_by_id.get(task.id)
        if first is not None:
            message = f"duplicate task id {task.id!r} (also defined in {display_path(first.path)})"
            problems.append(TaskProblem(path, "id", message))
            continue
        first_by_id[task.id] = task
        tasks.append(task)
    return LoadResult(tasks=tasks, problems=problems)


def _ignored(name: str) -> bool:
    return name.startswith((".", "_"))


def _suite_names(taskpacks: Path) -> list[str]:
    return sorted(p.name for p in taskpacks.iterdir() if p.is_dir() and not _ignored(p.name))


def _check_suite(taskpacks: Path, suite: str, existing: list[str]) -> TaskProblem | None:
    if not suite or suite in {".", ".."} or "\0" in suite or Path(suite).name != suite:
        message = f"{suite!r} is not a suite name (a directory name)"
        return TaskProblem(taskpacks, "", message, run_level=True)
    if (taskpacks / suite).is_dir():
        return None
    message = f"no such suite {suite!r}"
    close = difflib.get_close_matches(suite, existing, n=1)
    if close:
        message += f" (did you mean {close[0]!r}?)"
    message += f"; existing suites: {', '.join(existing) or 'none'}"
    return TaskProblem(taskpacks / suite, "", message, run_level=True)


def _task_files(suite_dir: Path) -> tuple[list[Path], list[TaskProblem]]:
    files: list[Path] = []
    problems: list[TaskProblem] = []
    for child in sorted(suite_dir.iterdir(), key=lambda p: p.name):
        if not child.is_dir() or _ignored(child.name):
            continue
        if (child / TASK_FILE).is_file():
            files.append(child / TASK_FILE)
            continue
        message = f"no {TASK_FILE} in this task directory"
        if os.path.lexists(child / TASK_FILE):
            message = f"{TASK_FILE} is not a regular file"
        elif (child / "task.yml").is_file():
            message += f" (found task.yml: rename it to {TASK_FILE})"
        else:
            message += " (directories starting with '_' or '.' are ignored)"
        problems.append(TaskProblem(child, "", message))
    return files, problems
