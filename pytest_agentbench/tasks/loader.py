"""Load one `task.yaml` into a validated TaskSpec, or say in one line per problem what is wrong.

Every problem is one line for a person: `<file>: <field>: <what was expected / what was found>`.
Checks run in order: readable UTF-8 (tasks.taskpack_files), bounded YAML (tasks.bounded_yaml),
spec and harness versions, the file's place in `<suite>/<task>/` and its taskpack-local
repository and oracle patch, then the schema (schemas.task). Finding the files is
tasks.discovery.
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
from pytest_agentbench.paths.own_repo import is_own_repository, own_repository_hint
from pytest_agentbench.schemas.task import (
    MAX_PATH,
    TASK_ID_PATTERN,
    TASK_SPEC_VERSION,
    OracleSpec,
    TaskSpec,
    relative_path_problem,
    repo_url_problem,
    version_tuple,
)
from pytest_agentbench.tasks.bounded_yaml import parse_yaml, text_problems, yaml_message
from pytest_agentbench.tasks.hidden_tests import hidden_tests_problem
from pytest_agentbench.tasks.problems import field_messages, one_line, show
from pytest_agentbench.tasks.taskpack_files import (
    MAX_TASK_ASSET_BYTES,
    MAX_TASK_FILE_BYTES,
    UnsafeFileError,
    open_task_file,
    read_regular_file,
)

TASK_FILE = "task.yaml"
MAX_PROBLEMS = 20  # lines per file; the rest are counted
MAX_MESSAGE = 240  # characters of one problem's message
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
    # A missing taskpacks directory or suite: the run has nothing to run. Every other problem
    # belongs to one task and becomes that task's ERROR item, while the other tasks still run.
    run_level: bool = False

    def __str__(self) -> str:
        parts = [display_path(self.path), self.field, self.message]
        return ": ".join(part for part in parts if part)

    @property
    def task_file(self) -> Path | None:
        """The task.yaml whose ERROR item reports this problem (it may not exist: a task
        directory without one); None for a run-level problem."""
        if self.run_level:
            return None
        if self.path.name == TASK_FILE and not self.path.is_dir():
            return self.path
        return self.path / TASK_FILE


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


# --------------------------------------------------------------------------- one file


def load_task(path: Path, *, check_layout: bool = True) -> LoadedTask:
    """Load one task.yaml or raise TaskSpecError listing every problem found in it.

    With `check_layout` the file must sit in `<suite>/<task>/task.yaml` and a relative `repo.url`
    must exist next to it; pass False for a frozen copy in a run directory.
    """
    task, problems = load_reported(path, check_layout=check_layout)
    if task is None:
        raise TaskSpecError(problems)
    return task


def load_reported(path: Path, *, check_layout: bool) -> tuple[LoadedTask | None, list[TaskProblem]]:
    """One task file loaded for a run: (the task or None, its problems), each one clamped line
    and at most MAX_PROBLEMS of them; even an unforeseen failure is one line, never an abort."""
    try:
        task, problems = _load(path, check_layout=check_layout)
    except (RecursionError, MemoryError):
        return None, [TaskProblem(path, "", "too deeply nested or too large to load")]
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop the run
        message = f"cannot load ({type(exc).__name__}: {one_line(str(exc))[:200]})"
        return None, [TaskProblem(path, "", message)]
    problems = [_clamped(problem) for problem in problems]
    if len(problems) > MAX_PROBLEMS:
        more = len(problems) - MAX_PROBLEMS + 1
        rest = TaskProblem(path, "", f"... and {more} more problems")
        problems = [*problems[: MAX_PROBLEMS - 1], rest]
    return task, problems


def _clamped(problem: TaskProblem) -> TaskProblem:
    """A line stays a line: no newlines, and a value echoed in it cannot make it huge."""
    message = one_line(problem.message)
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    field = problem.field if len(problem.field) <= 120 else problem.field[:117] + "..."
    if (message, field) == (problem.message, problem.field):
        return problem
    return TaskProblem(problem.path, field, message, problem.run_level)


def _load(path: Path, *, check_layout: bool) -> tuple[LoadedTask | None, list[TaskProblem]]:
    try:
        raw_text = read_regular_file(path, MAX_TASK_FILE_BYTES).decode("utf-8")
    except UnsafeFileError as exc:
        return None, [TaskProblem(path, "", str(exc))]
    except OSError as exc:
        return None, [TaskProblem(path, "", f"cannot read file: {exc.strerror or exc}")]
    except UnicodeDecodeError as exc:
        return None, [TaskProblem(path, "", f"not UTF-8 text (byte {exc.start}: {exc.reason})")]
    try:
        data = parse_yaml(raw_text)
    except yaml.YAMLError as exc:
        return None, [TaskProblem(path, "", yaml_message(exc, raw_text))]
    if data is None:
        message = f"file is empty (expected a mapping with {_REQUIRED_TOP})"
        return None, [TaskProblem(path, "", message)]
    if not isinstance(data, dict):
        message = f"expected a mapping of task fields at the top level, got {show(data)}"
        return None, [TaskProblem(path, "", message)]

    bad_text = [TaskProblem(path, name, message) for name, message in text_problems(data)]
    if bad_text:
        return None, bad_text
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
    """Checks that need the file's place: `<taskpacks>/<suite>/<task>/task.yaml`."""
    problems: list[TaskProblem] = []
    suite, suite_dir = data.get("suite"), path.parent.parent.name
    if isinstance(suite, str) and suite != suite_dir:
        message = f"{show(suite)} does not match its directory {suite_dir!r}"
        problems.append(TaskProblem(path, "suite", message))
    task_id, task_dir = data.get("id"), path.parent.name
    if isinstance(task_id, str) and re.match(TASK_ID_PATTERN, task_id) and task_id != task_dir:
        # a run's items, records and replay name the task by its id, people by its folder
        message = f"{show(task_id)} does not match its directory {task_dir!r}"
        problems.append(TaskProblem(path, "id", message))
    repo = data.get("repo")
    url = repo.get("url") if isinstance(repo, dict) else None
    relative = isinstance(url, str) and len(url) <= MAX_PATH and _is_relative_path(url)
    if relative and isinstance(url, str) and repo_url_problem(url) is None:
        repo_problem = _repo_path_problem(path, url)
        if repo_problem:
            problems.append(TaskProblem(path, "repo.url", repo_problem))
    oracle = data.get("oracle", {})
    patch = oracle.get("patch", OracleSpec().patch) if isinstance(oracle, dict) else None
    if isinstance(patch, str) and len(patch) <= MAX_PATH and relative_path_problem(patch) is None:
        named = isinstance(oracle, dict) and "patch" in oracle
        patch_problem = _asset_problem(path.parent, patch) or (
            _missing_named_file(path.parent, patch) if named else None)
        if patch_problem:
            problems.append(TaskProblem(path, "oracle.patch", patch_problem))
    validation = data.get("validation")
    hidden = validation.get("hidden_tests") if isinstance(validation, dict) else None
    if isinstance(hidden, str) and len(hidden) <= MAX_PATH and not relative_path_problem(hidden):
        hidden_problem = hidden_tests_problem(path.parent, hidden)
        if hidden_problem:
            problems.append(TaskProblem(path, "validation.hidden_tests", hidden_problem))
    return problems


def _repo_path_problem(path: Path, url: str) -> str | None:
    """A taskpack-local repository must exist inside the taskpacks root (a sibling `_shared`
    folder is fine), or be the git repository holding the taskpacks (paths/own_repo.py); a
    symlink or `..` anywhere else would hand a host repository to the agent."""
    root = path.parent.parent.parent
    try:
        resolved = (path.parent / url).resolve()
        inside = resolved.is_relative_to(root.resolve()) or is_own_repository(resolved, root)
        exists = resolved.exists()
    except (OSError, ValueError, RuntimeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        return f"cannot resolve this path ({reason})"
    if not inside:
        return (f"resolves outside the taskpacks directory ({display_path(resolved)}); "
                f"a relative path may name {own_repository_hint(root, path.parent)}")
    if not exists:
        shown = display_path(Path(os.path.normpath(path.parent / url)))
        return f"no such file or directory: {shown}"
    return None


def _asset_problem(task_dir: Path, relative: str) -> str | None:
    """A task file such as oracle.patch, when present, must be a regular file inside the task
    directory. A missing one is not a load problem (the oracle reports it)."""
    try:
        open_task_file(task_dir, relative, MAX_TASK_ASSET_BYTES, check_only=True)
    except FileNotFoundError:
        return None
    except UnsafeFileError as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    return None


def _missing_named_file(task_dir: Path, relative: str) -> str | None:
    """A file task.yaml names explicitly must be there: a misspelled name would otherwise be
    found out only by the oracle, as if the task had no reference solution."""
    target = task_dir / relative
    if target.exists() or target.is_symlink():
        return None
    siblings = sorted(p.name for p in target.parent.glob("*.patch")) if target.parent.is_dir() \
        else []
    close = difflib.get_close_matches(target.name, siblings, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else (
        f" (the task directory has {', '.join(siblings[:5])})" if siblings else "")
    return f"no such file in the task directory: {relative}{hint}"


def _is_relative_path(url: str) -> bool:
    """True for `repo.bundle` or `../shared/repo.git`; False for URLs, scp-like and absolute."""
    if not url or _URL_SCHEME.match(url) or os.path.isabs(url) or url.startswith("~"):
        return False
    return ":" not in url.split("/", 1)[0]  # git reads `host:path` (colon before a slash) as ssh


