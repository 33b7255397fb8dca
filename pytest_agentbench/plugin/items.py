"""Collection: each task.yaml becomes a TaskFile whose items are the task's attempts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agentbench.schemas.taxonomy import blame
from pytest_agentbench.tasks.loader import TASK_FILE, LoadedTask, TaskProblem

if TYPE_CHECKING:
    from pytest_agentbench.plugin.active import AgentbenchConfig


class AgentFailure(Exception):
    """The agent did not fix the task (pytest FAILED)."""


class TaskError(Exception):
    """The task or the infrastructure is at fault (pytest ERROR)."""


class InvalidTaskSpec(Exception):
    pass


def run_attempt(agentbench_attempt: dict[str, Any]) -> None:
    """The test function of every task item; the attempt itself runs in its fixture, so that
    task and infrastructure problems surface as ERROR (setup) and agent failures as FAILED."""
    result = agentbench_attempt["result"]
    if not result["passed"]:
        raise AgentFailure(failure_text(agentbench_attempt))


def failure_text(record: dict[str, Any]) -> str:
    result = record["result"]
    sub = f" [{result['sub_reason']}]" if result.get("sub_reason") else ""
    where = record.get("artifact_paths", {}).get("task_dir", "")
    return f"{result['failure_reason']}{sub}: {result['summary']}\n  artifacts: {where}"


def is_error(record: dict[str, Any]) -> bool:
    return blame(record["result"]["failure_reason"]) in ("task", "infra")


class TaskFile(pytest.File):
    def collect(self) -> list[pytest.Item]:
        ab: AgentbenchConfig = self.config.stash[AB_KEY]
        path = self.path.resolve()
        loaded = ab.tasks_by_path.get(path)
        if loaded is None:
            problems = ab.problems_by_path.get(path, [])
            return [
                InvalidTaskItem.from_parent(self, name=self.path.parent.name, problems=problems)
            ]
        items: list[pytest.Item] = []
        for index in range(ab.attempts):
            name = (
                loaded.id
                if ab.attempts == 1
                else f"{loaded.id}[{ab.variant.name}-attempt{index + 1}]"
            )
            item = TaskItem.from_parent(self, name=name, callobj=run_attempt)
            item.init_task(loaded, index)
            items.append(item)
        return items


class InvalidTaskDir(pytest.Directory):
    """A task directory with no loadable task.yaml (none at all, a `task.yml`, a FIFO): one
    ERROR item, like a task.yaml that fails to load, while every other task still runs."""

    problems: list[TaskProblem]

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        item = InvalidTaskItem.from_parent(self, name=self.path.name, problems=self.problems)
        return [item]


def collect_task_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """For `pytest_collect_directory`: the ERROR collector of a task directory whose problems
    the loader reported (keyed by its missing task.yaml, or by the directory); None otherwise."""
    ab = parent.config.stash.get(AB_KEY, None)
    if ab is None or (path / TASK_FILE).is_file():
        return None
    problems = ab.problems_by_path.get((path / TASK_FILE).resolve()) or ab.problems_by_path.get(
        path.resolve()
    )
    if not problems:
        return None
    collector: InvalidTaskDir = InvalidTaskDir.from_parent(parent, path=path)
    collector.problems = problems
    return collector


class TaskItem(pytest.Function):
    loaded: LoadedTask
    attempt_index: int

    def init_task(self, loaded: LoadedTask, attempt_index: int) -> None:
        self.loaded, self.attempt_index = loaded, attempt_index
        spec = loaded.spec
        self.extra_keyword_matches.update({spec.id, spec.suite, *spec.labels})
        for label in spec.labels:
            self.add_marker(pytest.mark.agentbench_label(label))
        reason = spec.quarantine_reason
        if reason:
            self.add_marker(pytest.mark.agentbench_quarantine(reason=reason))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"agentbench task {self.name}"


class InvalidTaskItem(pytest.Item):
    """A task.yaml that failed to load: one ERROR with one line per problem, no traceback."""

    def __init__(self, *, problems: list[TaskProblem], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.problems = problems

    def setup(self) -> None:
        raise InvalidTaskSpec("\n".join(str(p) for p in self.problems) or "invalid task")

    def runtest(self) -> None:  # pragma: no cover - setup always raises
        pass

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"invalid task {self.name}"


SHORT_FAILURES = (AgentFailure, TaskError, InvalidTaskSpec)
AB_KEY: pytest.StashKey[AgentbenchConfig] = pytest.StashKey()
