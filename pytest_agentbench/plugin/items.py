"""Collection: each task.yaml becomes a TaskFile whose items are the task's attempts; a task that
does not load becomes one ERROR item. The collectors get what they show from the plugin's hooks
(plugin/agentbench_plugin.py) as constructor arguments and look nothing up themselves.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.schemas.records import attempt_key
from pytest_agentbench.schemas.taxonomy import blame
from pytest_agentbench.tasks.discovery import discover
from pytest_agentbench.tasks.loader import TASK_FILE, LoadedTask, TaskProblem


class AgentFailure(Exception):
    """The agent did not fix the task (pytest FAILED)."""


class TaskError(Exception):
    """The task or the infrastructure is at fault (pytest ERROR)."""


class InvalidTaskSpec(Exception):
    pass


SHORT_FAILURES = (AgentFailure, TaskError, InvalidTaskSpec)  # reported as one text, no traceback


InvalidRecord = Callable[[Path, list[str]], "dict[str, Any] | None"]
"""The TASK_INVALID record of a task directory with these problems (None: no run to record
in, e.g. --collect-only)."""

# Marks a label must never become, whether or not their plugin is loaded now: pytest's own
# (`skip` as a label would skip the task), those of common plugins that act on a mark (`flaky`
# makes pytest-rerunfailures re-run a whole attempt), and the words of -m's grammar.
RESERVED_MARKS = frozenset(
    {"skip", "skipif", "xfail", "parametrize", "usefixtures", "filterwarnings", "tryfirst",
     "trylast", "flaky", "timeout", "only", "forked", "order", "run", "dependency",
     "xdist_group", "asyncio", "anyio", "django_db", "repeat", "retry", "benchmark",
     "and", "or", "not", "agentbench_label", "agentbench_quarantine"}
)
LABEL_MARK_HELP = "agentbench task label (task.yaml)"
_MARK_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[.+-][A-Za-z0-9_]+)*")


def label_marks(labels: Iterable[str], taken: Iterable[str] = ()) -> list[str]:
    """The labels that become markers (`-m <label>`): names -m can spell, not a reserved mark
    and not one another plugin or the project registered (`taken`). Every label still matches
    `-k`."""
    refused = RESERVED_MARKS | {name.lower() for name in taken}
    return sorted(
        {label for label in labels
         if _MARK_NAME.fullmatch(label) and label.lower() not in refused}
    )


def foreign_marks(config: pytest.Config) -> set[str]:
    """Markers registered by anything but the plugin's labels (the `markers` ini lines)."""
    names = set()
    for line in config.getini("markers"):
        name, _, text = str(line).partition(":")
        if text.strip() != LABEL_MARK_HELP:
            names.add(name.split("(")[0].strip())
    return names


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


def item_name(task_id: str, index: int, attempts: int, variant: str) -> str:
    """The test name of attempt `index` (0-based): the task id alone when there is one attempt."""
    return task_id if attempts == 1 else f"{task_id}[{variant}-attempt{index + 1}]"


@dataclass
class CollectedTasks:
    """The run's tasks by resolved task.yaml path, and the problems of those that did not load
    (keyed by their task.yaml, or by the task directory when it has none)."""

    tasks: dict[Path, LoadedTask] = field(default_factory=dict)
    problems: dict[Path, list[TaskProblem]] = field(default_factory=dict)
    nothing_to_run: str | None = None  # a missing suite or taskpacks directory

    @classmethod
    def discover(cls, taskpacks: Path, suites: Iterable[str]) -> CollectedTasks:
        """Load the suites' tasks (see `check` for a run with nothing to run)."""
        index = cls()
        loaded = discover(taskpacks, list(suites))
        for problem in loaded.problems:
            if problem.task_file is None:
                index.nothing_to_run = index.nothing_to_run or str(problem)
                continue
            index.problems.setdefault(problem.task_file.resolve(), []).append(problem)
        for task in loaded.tasks:
            index.tasks[task.path.resolve()] = task
        return index

    def check(self) -> None:
        """ValueError (one line) when there is nothing to run."""
        if self.nothing_to_run is not None:
            raise ValueError(self.nothing_to_run)

    def knows(self, task_file: Path) -> bool:
        resolved = task_file.resolve()
        return resolved in self.tasks or resolved in self.problems

    def directory_problems(self, path: Path) -> list[TaskProblem]:
        """Problems of a task directory with no loadable task.yaml."""
        by_file = self.problems.get((path / TASK_FILE).resolve())
        return by_file or self.problems.get(path.resolve()) or []

    def invalid_names(self) -> set[str]:
        """The test names of the invalid tasks' ERROR items (their directory names)."""
        return {
            (path.parent if path.name == TASK_FILE else path).name for path in self.problems
        }

    def item_count(self, attempts: int, done: Iterable[str] = ()) -> int:
        """The items collection makes at most (-k, -m and paths may select fewer): each task's
        attempts not yet recorded, and one ERROR item per task that did not load."""
        skip = set(done)
        return len(self.problems) + sum(attempt_key(task.id, index) not in skip
                                        for task in self.tasks.values()
                                        for index in range(attempts))

    def attempts_by_name(self, attempts: int, variant: str) -> dict[str, tuple[LoadedTask, int]]:
        """Every item's (task, attempt index) by its test name (task ids are unique in a run)."""
        return {
            item_name(task.id, index, attempts, variant): (task, index)
            for task in self.tasks.values()
            for index in range(attempts)
        }


class TaskFile(pytest.File):
    """A task.yaml: one TaskItem per attempt, or one ERROR item when it did not load."""

    def __init__(
        self,
        *,
        task: LoadedTask | None,
        problems: list[TaskProblem],
        attempts: int,
        variant: str,
        invalid_record: InvalidRecord,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.task, self.problems, self.attempts, self.variant = task, problems, attempts, variant
        self.invalid_record = invalid_record

    def collect(self) -> list[pytest.Item]:
        if self.task is None:
            name = self.path.parent.name
            invalid = InvalidTaskItem.from_parent(
                self, name=name, problems=self.problems, task_dir=self.path.parent,
                invalid_record=self.invalid_record,
            )
            return [invalid]
        items: list[pytest.Item] = []
        for index in range(self.attempts):
            name = item_name(self.task.id, index, self.attempts, self.variant)
            item = TaskItem.from_parent(self, name=name, callobj=run_attempt)
            item.init_task(self.task, index)
            items.append(item)
        return items


class InvalidTaskDir(pytest.Directory):
    """A task directory with no loadable task.yaml (none at all, a `task.yml`, a FIFO): one
    ERROR item, like a task.yaml that fails to load, while every other task still runs."""

    def __init__(
        self, *, problems: list[TaskProblem], invalid_record: InvalidRecord, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.problems, self.invalid_record = problems, invalid_record

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        item = InvalidTaskItem.from_parent(
            self, name=self.path.name, problems=self.problems, task_dir=self.path,
            invalid_record=self.invalid_record,
        )
        return [item]


class TaskItem(pytest.Function):
    loaded: LoadedTask
    attempt_index: int

    def init_task(self, loaded: LoadedTask, attempt_index: int) -> None:
        self.loaded, self.attempt_index = loaded, attempt_index
        spec = loaded.spec
        self.extra_keyword_matches.update({spec.id, spec.suite, *spec.labels})
        for label in spec.labels:
            self.add_marker(pytest.mark.agentbench_label(label))
        # registered by the plugin: `-m <label>`; never a mark some plugin registered since
        for name in label_marks(spec.labels, foreign_marks(self.config)):
            self.add_marker(getattr(pytest.mark, name))
        reason = spec.quarantine_reason
        if reason:
            self.add_marker(pytest.mark.agentbench_quarantine(reason=reason))

    @property
    def attempt_key(self) -> str:
        return attempt_key(self.loaded.id, self.attempt_index)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"agentbench task {self.name}"


class InvalidTaskItem(pytest.Item):
    """A task.yaml that failed to load: one ERROR with one line per problem, no traceback, and
    a TASK_INVALID record (attempts.jsonl and the report count it apart from the agent's)."""

    def __init__(
        self,
        *,
        problems: list[TaskProblem],
        task_dir: Path,
        invalid_record: InvalidRecord,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.problems, self.task_dir, self.invalid_record = problems, task_dir, invalid_record

    @property
    def attempt_key(self) -> str:
        return attempt_key(self.task_dir.name, 0)

    def setup(self) -> None:
        lines = [str(p) for p in self.problems]
        record = self.invalid_record(self.task_dir, lines)
        if record is not None:
            self.agentbench_record = record  # attached to the report (plugin/agentbench_plugin.py)
        raise InvalidTaskSpec("\n".join(lines) or "invalid task")

    def runtest(self) -> None:  # pragma: no cover - setup always raises
        pass

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"invalid task {self.name}"
