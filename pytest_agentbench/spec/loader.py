"""Find and load `taskpacks/<suite>/<task>/task.yaml` files.

Every problem is one line for a person: `<file>: <field>: <what was expected / what was found>`.
A bad file is reported and skipped; every other task still loads. Discovery is sorted and depends
only on the files, so every pytest-xdist worker sees the identical task list.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pytest_agentbench import __version__
from pytest_agentbench.spec.problems import field_messages, one_line, show
from pytest_agentbench.spec.task import TASK_SPEC_VERSION, TaskSpec, version_tuple

TASK_FILE = "task.yaml"
_REQUIRED_TOP = "task_spec_version, id, suite, repo and validation"
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_VERSION = re.compile(r"^\d+(\.\d+){0,2}$")


def display_path(path: Path) -> str:
    """`path` relative to the current directory when it lies below it, else absolute."""
    try:
        cwd = Path.cwd()
    except OSError:
        return str(path)
    absolute = path if path.is_absolute() else cwd / path
    try:
        return str(absolute.relative_to(cwd))
    except ValueError:
        return str(absolute)


@dataclass(frozen=True)
class TaskProblem:
    path: Path
    field: str  # dotted field path ("agent.max_steps", "setup.commands[0]"); "" for the whole file
    message: str

    def __str__(self) -> str:
        parts = [display_path(self.path), self.field, self.message]
        return ": ".join(part for part in parts if part)


class TaskSpecError(Exception):
    """A task file could not be loaded; `problems` holds one line per problem."""

    def __init__(self, problems: Sequence[TaskProblem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


@dataclass(frozen=True)
class LoadedTask:
    spec: TaskSpec
    path: Path  # the task.yaml
    task_dir: Path
    raw_text: str  # exactly as read, for freezing a copy into the run directory
    spec_hash: str  # sha256 hex of the canonical JSON of the validated spec

    @property
    def id(self) -> str:
        return self.spec.id


@dataclass(frozen=True)
class LoadResult:
    tasks: list[LoadedTask] = field(default_factory=list)
    problems: list[TaskProblem] = field(default_factory=list)


def spec_hash(spec: TaskSpec) -> str:
    """Content hash of a validated spec (defaults included), for resume and cache keys."""
    canonical = json.dumps(
        spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- discovery


def discover(taskpacks: Path, suites: list[str] | None = None) -> LoadResult:
    """Load every `taskpacks/<suite>/*/task.yaml` of the given suites (all suites when None)."""
    if not taskpacks.is_dir():
        return LoadResult(problems=[TaskProblem(taskpacks, "", "taskpacks directory not found")])
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
        task, file_problems = _load(path, check_layout=True)
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
    if not suite or suite in {".", ".."} or Path(suite).name != suite:
        return TaskProblem(taskpacks, "", f"{suite!r} is not a suite name (a directory name)")
    if (taskpacks / suite).is_dir():
        return None
    message = f"no such suite {suite!r}"
    close = difflib.get_close_matches(suite, existing, n=1)
    if close:
        message += f" (did you mean {close[0]!r}?)"
    message += f"; existing suites: {', '.join(existing) or 'none'}"
    return TaskProblem(taskpacks / suite, "", message)


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
        if (child / "task.yml").is_file():
            message += f" (found task.yml: rename it to {TASK_FILE})"
        else:
            message += " (directories starting with '_' or '.' are ignored)"
        problems.append(TaskProblem(child, "", message))
    return files, problems


# --------------------------------------------------------------------------- one file


def load_task(path: Path, *, check_layout: bool = True) -> LoadedTask:
    """Load one task.yaml or raise TaskSpecError listing every problem found in it.

    With `check_layout` the file must sit in `<suite>/<task>/task.yaml` and a relative `repo.url`
    must exist next to it; pass False for a frozen copy in a run directory.
    """
    task, problems = _load(path, check_layout=check_layout)
    if task is None:
        raise TaskSpecError(problems)
    return task


def _load(path: Path, *, check_layout: bool) -> tuple[LoadedTask | None, list[TaskProblem]]:
    try:
        raw_text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        return None, [TaskProblem(path, "", f"cannot read file: {exc.strerror or exc}")]
    except UnicodeDecodeError as exc:
        return None, [TaskProblem(path, "", f"not UTF-8 text (byte {exc.start}: {exc.reason})")]
    try:
        data = yaml.load(raw_text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        return None, [TaskProblem(path, "", _yaml_message(exc, raw_text))]
    if data is None:
        message = f"file is empty (expected a mapping with {_REQUIRED_TOP})"
        return None, [TaskProblem(path, "", message)]
    if not isinstance(data, dict):
        message = f"expected a mapping of task fields at the top level, got {show(data)}"
        return None, [TaskProblem(path, "", message)]

    problems, stop = _version_problems(path, data)
    if stop:
        return None, problems
    if check_layout:
        problems.extend(_layout_problems(path, data))
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as exc:
        reported = {problem.field for problem in problems}
        found = (TaskProblem(path, name, message) for name, message in field_messages(exc))
        problems.extend(p for p in found if p.field not in reported)
        return None, problems
    if problems:
        return None, problems
    task = LoadedTask(spec, path, path.parent, raw_text, spec_hash(spec))
    return task, []


def _version_problems(path: Path, data: dict[Any, Any]) -> tuple[list[TaskProblem], bool]:
    """Spec and harness version checks; stop=True when the rest of the file must not be judged."""
    problems: list[TaskProblem] = []
    stop = False
    version = data.get("task_spec_version")
    if "task_spec_version" in data and (type(version) is not int or version != TASK_SPEC_VERSION):
        if type(version) is int and version > TASK_SPEC_VERSION:
            stop = True
            message = (
                f"task spec version {version} is newer than this harness reads "
                f"({TASK_SPEC_VERSION}); upgrade pytest-agentbench (this is {__version__})"
            )
        else:
            message = f"expected {TASK_SPEC_VERSION}, got {show(version)}"
        problems.append(TaskProblem(path, "task_spec_version", message))
    minimum = data.get("harness_min_version")
    if isinstance(minimum, str) and _VERSION.match(minimum) and _too_old(minimum):
        stop = True
        message = f"requires harness >= {minimum}, this is {__version__}"
        problems.append(TaskProblem(path, "harness_min_version", message))
    return problems, stop


def _too_old(minimum: str) -> bool:
    def padded(version: str) -> tuple[int, ...]:
        return (version_tuple(version) + (0, 0, 0))[:3]

    return padded(__version__) < padded(minimum)


def _layout_problems(path: Path, data: dict[Any, Any]) -> list[TaskProblem]:
    problems: list[TaskProblem] = []
    suite, suite_dir = data.get("suite"), path.parent.parent.name
    if isinstance(suite, str) and suite != suite_dir:
        message = f"{suite!r} does not match its directory {suite_dir!r}"
        problems.append(TaskProblem(path, "suite", message))
    repo = data.get("repo")
    url = repo.get("url") if isinstance(repo, dict) else None
    if isinstance(url, str) and _is_relative_path(url):
        resolved = Path(os.path.normpath(path.parent / url))
        if not resolved.exists():
            message = f"no such file or directory: {display_path(resolved)}"
            problems.append(TaskProblem(path, "repo.url", message))
    return problems


def _is_relative_path(url: str) -> bool:
    """True for `repo.bundle` or `../shared/repo.git`; False for URLs, scp-like and absolute."""
    if not url or _URL_SCHEME.match(url) or os.path.isabs(url) or url.startswith("~"):
        return False
    return ":" not in url.split("/", 1)[0]  # git reads `host:path` (colon before a slash) as ssh


# --------------------------------------------------------------------------- YAML


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one)."""


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
            continue
        key = loader.construct_object(key_node)
        if key in seen:
            raise _DuplicateKeyError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node)


class _DuplicateKeyError(yaml.constructor.ConstructorError):
    pass


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _yaml_message(exc: yaml.YAMLError, text: str) -> str:
    if isinstance(exc, yaml.reader.ReaderError):  # a control character; it carries no mark
        position = exc.position
        line = text.count("\n", 0, position) + 1
        column = position - text.rfind("\n", 0, position)
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return (
            f"line {line}, column {column}: YAML syntax error: "
            f"unacceptable character #x{char:04x}: {exc.reason}"
        )
    if not isinstance(exc, yaml.MarkedYAMLError):
        return f"YAML error: {one_line(str(exc))}"
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    if isinstance(exc, _DuplicateKeyError):
        return f"{where}{exc.problem} (YAML would silently keep only the last value)"
    message = f"{where}YAML syntax error: {one_line(exc.problem or str(exc))}"
    if exc.context:
        context_mark = exc.context_mark
        at = f" started at line {context_mark.line + 1}" if context_mark else ""
        message += f" ({one_line(exc.context)}{at})"
    return message
