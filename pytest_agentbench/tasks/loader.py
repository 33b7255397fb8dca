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
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pytest_agentbench import __version__
from pytest_agentbench.schemas.task import (
    MAX_PATH,
    TASK_SPEC_VERSION,
    OracleSpec,
    TaskSpec,
    relative_path_problem,
    repo_url_problem,
    version_tuple,
)
from pytest_agentbench.tasks.problems import field_messages, one_line, show

TASK_FILE = "task.yaml"
MAX_TASK_FILE_BYTES = 1 << 20  # a task.yaml or a variant YAML
MAX_TASK_ASSET_BYTES = 16 << 20  # oracle.patch, scripted.yaml
MAX_YAML_DEPTH = 32  # nested mappings/lists; a task.yaml needs 4
MAX_YAML_NODES = 100_000  # values after expanding aliases ("billion laughs")
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


# --------------------------------------------------------------------------- discovery


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
        task, file_problems = _load_guarded(path, check_layout=True)
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


# --------------------------------------------------------------------------- one file


def load_task(path: Path, *, check_layout: bool = True) -> LoadedTask:
    """Load one task.yaml or raise TaskSpecError listing every problem found in it.

    With `check_layout` the file must sit in `<suite>/<task>/task.yaml` and a relative `repo.url`
    must exist next to it; pass False for a frozen copy in a run directory.
    """
    task, problems = _load_guarded(path, check_layout=check_layout)
    if task is None:
        raise TaskSpecError(problems)
    return task


def _load_guarded(path: Path, *, check_layout: bool) -> tuple[LoadedTask | None, list[TaskProblem]]:
    """`_load`, where even an unforeseen failure is one line for this file, never an abort."""
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
        return None, [TaskProblem(path, "", _yaml_message(exc, raw_text))]
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
        patch_problem = _asset_problem(path.parent, patch)
        if patch_problem:
            problems.append(TaskProblem(path, "oracle.patch", patch_problem))
    return problems


def _repo_path_problem(path: Path, url: str) -> str | None:
    """A taskpack-local repository must exist inside the taskpacks root (a sibling `_shared`
    folder is fine); a symlink or `..` out of it would hand a host repository to the agent."""
    root = path.parent.parent.parent
    try:
        resolved = (path.parent / url).resolve()
        inside = resolved.is_relative_to(root.resolve())
        exists = resolved.exists()
    except (OSError, ValueError, RuntimeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        return f"cannot resolve this path ({reason})"
    if not inside:
        return f"resolves outside the taskpacks directory ({display_path(resolved)})"
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


def _is_relative_path(url: str) -> bool:
    """True for `repo.bundle` or `../shared/repo.git`; False for URLs, scp-like and absolute."""
    if not url or _URL_SCHEME.match(url) or os.path.isabs(url) or url.startswith("~"):
        return False
    return ":" not in url.split("/", 1)[0]  # git reads `host:path` (colon before a slash) as ssh


def text_problems(data: Any) -> Iterator[tuple[str, str]]:
    """(field, message) for each string (key or value) holding a NUL or a lone surrogate:
    they break paths, command lines and JSON records alike."""
    stack: list[tuple[str, Any]] = [("", data)]
    seen: set[int] = set()
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            message = _text_problem(value)
            if message:
                yield where, message
        elif isinstance(value, dict | list) and id(value) not in seen:
            seen.add(id(value))  # an alias shares its value: check it once
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, int):
                    name = f"{where}[{key}]"
                else:
                    name = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and _text_problem(key):
                    yield where, f"key {key!r}: {_text_problem(key)}"
                    continue
                stack.append((name, item))


def _text_problem(text: str) -> str | None:
    if "\0" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a character that is not valid Unicode (a lone surrogate)"
    return None


# --------------------------------------------------------------------------- safe reading


class UnsafeFileError(Exception):
    """A task-provided file that must not be read: outside its directory, not a regular file
    (a FIFO or device would block or never end), or too large. The message is one line."""


def read_regular_file(path: Path, limit: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of a regular file of at most `limit` bytes.

    Checks the type before opening (opening a FIFO blocks, some devices act on open), opens
    non-blocking (and without following a final symlink unless asked), then checks again on the
    open descriptor, so a file swapped in between is refused too.
    """
    before = os.stat(path, follow_symlinks=follow_symlinks)
    _check_regular(before, limit)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags)
    try:
        after = os.fstat(fd)
        _check_regular(after, limit)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise UnsafeFileError("the file changed while it was opened")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise UnsafeFileError(f"file is too large (more than {limit} bytes)")
    return b"".join(chunks)


def _check_regular(info: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeFileError(f"not a regular file ({_file_kind(info.st_mode)})")
    if info.st_size > limit:
        raise UnsafeFileError(f"file is too large ({info.st_size} bytes; at most {limit})")


def _file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    )
    return next((name for test, name in kinds if test(mode)), "not a file")


def open_task_file(task_dir: Path, relative: str, limit: int, *, check_only: bool = False) -> bytes:
    """Read `relative` (oracle.patch, scripted.yaml) from a task's directory, confined to it.

    The path must be relative without `..`; after resolving symlinks it must still lie inside
    the task directory; it must be a regular file of at most `limit` bytes. Raises
    FileNotFoundError when it does not exist, UnsafeFileError when it must not be read.
    """
    problem = relative_path_problem(relative)
    if problem is not None:
        raise UnsafeFileError(f"{relative!r}: {problem}")
    base = task_dir.resolve()
    resolved = (base / relative).resolve()
    if not resolved.is_relative_to(base):
        raise UnsafeFileError(
            f"{relative!r} resolves outside the task directory (a symlink pointing out?)"
        )
    if not os.path.lexists(resolved):
        raise FileNotFoundError(relative)
    if check_only:
        _check_regular(os.stat(resolved, follow_symlinks=False), limit)
        return b""
    return read_regular_file(resolved, limit, follow_symlinks=False)


# --------------------------------------------------------------------------- YAML


def parse_yaml(text: str) -> Any:
    """Load YAML safely and within bounds: SafeLoader types only, no duplicate keys, no
    recursive aliases, at most MAX_YAML_DEPTH levels of nesting and MAX_YAML_NODES values after
    expanding aliases. Every failure is a yaml.YAMLError; format it with `yaml_message`."""
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def yaml_message(exc: yaml.YAMLError, text: str) -> str:
    """One line for a YAML error: where it is and what is wrong."""
    return _yaml_message(exc, text)


class _LimitError(yaml.MarkedYAMLError):
    """A document beyond the loader's bounds; reported without 'syntax error'."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one) and keeps
    documents within bounds while their events stream in, before the recursive composer (or
    pydantic) sees them: deep nesting and alias bombs become one error, never a crash."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._frames: list[tuple[str | None, list[int]]] = []  # (anchor, [size]) per open node
        self._sizes: dict[str, int] = {}  # anchor -> values it expands to

    def get_event(self) -> yaml.Event:
        event: yaml.Event = super().get_event()  # type: ignore[no-untyped-call]
        self._account(event)
        return event

    def _account(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.CollectionStartEvent):
            if len(self._frames) >= MAX_YAML_DEPTH:
                raise self._limit(event, f"nested more than {MAX_YAML_DEPTH} levels deep")
            self._frames.append((event.anchor, [1]))
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, (size,) = self._frames.pop()
            if anchor is not None:
                self._sizes[anchor] = size
            self._add(event, size)
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                self._sizes[event.anchor] = 1
            self._add(event, 1)
        elif isinstance(event, yaml.AliasEvent):
            anchor = event.anchor
            if any(open_anchor == anchor for open_anchor, _ in self._frames):
                raise self._limit(event, f"alias *{anchor} refers to a value that contains it")
            self._add(event, self._sizes.get(anchor or "", 1))

    def _add(self, event: yaml.Event, size: int) -> None:
        if not self._frames:
            return
        counter = self._frames[-1][1]
        counter[0] += size
        if counter[0] > MAX_YAML_NODES:
            raise self._limit(event, f"more than {MAX_YAML_NODES} values (after expanding aliases)")

    def _limit(self, event: yaml.Event, problem: str) -> _LimitError:
        return _LimitError(None, None, problem, event.start_mark)  # type: ignore[arg-type]

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more digits than int() converts
            raise _LimitError(None, None, "number too large", node.start_mark) from None


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
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)


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
    if isinstance(exc, _LimitError):
        return f"{where}{exc.problem}"
    message = f"{where}YAML syntax error: {one_line(exc.problem or str(exc))}"
    if exc.context:
        context_mark = exc.context_mark
        at = f" started at line {context_mark.line + 1}" if context_mark else ""
        message += f" ({one_line(exc.context)}{at})"
    return message
