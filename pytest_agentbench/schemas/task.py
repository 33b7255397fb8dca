"""Task spec v1: the schema of `taskpacks/<suite>/<task>/task.yaml`.

Strict on purpose (extra="forbid"): a typo must fail loudly instead of silently changing behaviour.
Every number has a finite upper bound and every path or URL a task names is checked here, before
anything runs: a task file is input, and it must not reach the host.
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)

TASK_SPEC_VERSION = 1
TASK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"

DAY_SEC = 86_400
MAX_TEXT = 100_000  # characters of one command, description or other free text
MAX_ITEMS = 1_000  # entries of one list
MAX_PATH = 1_024  # characters of a path or URL

REPO_URL_SCHEMES = ("https", "http", "ssh", "git", "file")
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
# git runs `git-remote-<helper>` for `<helper>::<address>` (ext:: runs a shell command).
_REMOTE_HELPER = re.compile(r"^(?P<helper>[A-Za-z0-9][A-Za-z0-9+.-]*)::")
_URL_HINT = (
    "https://, http://, ssh://, git://, file://, user@host:path or a path relative to task.yaml"
)
_FORBIDDEN_WORKDIRS = ("/env", "/tmp", "/proc", "/sys", "/dev", "/etc", "/usr", "/home/runner")
_WORKDIR = re.compile(r"^(/[A-Za-z0-9._+@-]+)+$")
RUNNER_PYTHONS = ("3.11",)  # what the runner image provides (bookworm's python3; runner/Dockerfile)


def _not_bool(value: object) -> object:
    """YAML `true` is not a number (pydantic would read it as 1)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {'true' if value else 'false'}")
    return value


Int = Annotated[int, BeforeValidator(_not_bool)]
Float = Annotated[float, BeforeValidator(_not_bool)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
ShortText = Annotated[str, Field(max_length=MAX_PATH)]
ExitCode = Annotated[int, BeforeValidator(_not_bool), Field(ge=0, le=255)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# --------------------------------------------------------------------------- checks


def repo_url_problem(url: str) -> str | None:
    """Why git must not be given `url`, or None. Shared by the spec and the repository manager.

    Allowed: https/http/ssh/git/file URLs, scp-like `user@host:path`, and relative paths (to a
    bundle or repository in the taskpack). Refused: anything git would read as an option, remote
    helpers (`ext::`, `fd::`, `<name>::`), other schemes, absolute or `~` paths.
    """
    if url != url.strip():
        return "leading or trailing whitespace"
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in url):
        return "contains a control character"
    if url.startswith("-"):
        return "must not start with '-' (git would read it as an option)"
    helper = _REMOTE_HELPER.match(url)
    if helper:
        return f"remote helper URLs ({helper['helper']}::...) are not allowed: they run programs"
    scheme = _SCHEME.match(url)
    if scheme:
        return _scheme_url_problem(url, scheme["scheme"].lower())
    if ":" in url.split("/", 1)[0]:  # git's rule: a colon before any slash is scp-like ssh
        return _scp_problem(url)
    if url.startswith(("/", "~")):
        return "absolute paths are not allowed; use a file:// URL or a path relative to task.yaml"
    return None


def _scheme_url_problem(url: str, scheme: str) -> str | None:
    if scheme not in REPO_URL_SCHEMES:
        allowed = ", ".join(REPO_URL_SCHEMES)
        return f"URL scheme {scheme!r} is not allowed (expected one of: {allowed})"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        return f"not a valid URL: {exc}"
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            return "expected file:///absolute/path"
        return None
    if not parts.hostname:
        return "the URL has no host"
    if parts.netloc.startswith("-") or parts.hostname.startswith("-"):
        return "the host must not start with '-'"
    return None


def _scp_problem(url: str) -> str | None:
    target, _, path = url.partition(":")
    if target.startswith("[") and "]:" in url:  # [host]:path or [user@host:port]:path
        target, _, path = url[1:].partition("]:")
    user, _, host = target.rpartition("@")
    if not host:
        return f"expected user@host:path, got no host (use {_URL_HINT})"
    if host.startswith("-") or user.startswith("-") or path.startswith("-"):
        return "user, host and path must not start with '-'"
    if not path:
        return "expected user@host:path, got no path"
    return None


def relative_path_problem(path: str) -> str | None:
    """Why `path` is not a plain relative path that stays inside its directory, or None."""
    if not path or path != path.strip():
        return "expected a relative path (no leading or trailing whitespace)"
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in path):
        return "contains a control character"
    if path.startswith(("/", "~", "\\")):
        return "expected a path relative to task.yaml, got an absolute one"
    parts = path.replace("\\", "/").split("/")
    if ".." in parts:
        return "must stay inside the task directory (no '..')"
    return None


def workdir_problem(workdir: str) -> str | None:
    if not _WORKDIR.match(workdir):
        return "expected an absolute path of letters, digits and ._+@- (e.g. /workspace)"
    if posixpath.normpath(workdir) != workdir:
        return f"expected a normalized path (e.g. {posixpath.normpath(workdir)!r})"
    for reserved in _FORBIDDEN_WORKDIRS:
        if workdir == reserved or workdir.startswith(reserved + "/"):
            return f"{reserved} is reserved by the sandbox; use a directory such as /workspace"
    return None


def _compile(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from exc
    except (RecursionError, OverflowError, MemoryError):
        raise ValueError("regular expression is too deeply nested or too large") from None


# --------------------------------------------------------------------------- models


class RepoSpec(Strict):
    url: str = Field(
        min_length=1,
        max_length=MAX_PATH,
        description="an https://, http://, ssh://, git:// or file:// URL, scp-like user@host:path, "
        "or a path relative to task.yaml of a git bundle or repository inside the taskpacks "
        "directory (e.g. ../../_shared/minilib.bundle) or of the git repository that holds the "
        "taskpacks directory (e.g. ../../..); never an option or a remote helper",
    )
    commit: str = Field(pattern=r"^[0-9a-f]{7,40}$", description="pinned commit sha (hex)")

    @field_validator("url")
    @classmethod
    def _safe_url(cls, value: str) -> str:
        problem = repo_url_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class EnvironmentSpec(Strict):
    docker_image: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,255}$",
        description="image of the sandbox; None: the harness's runner image",
    )
    python: str = Field(
        default="3.11",
        max_length=32,
        description="the Python the task needs; the runner image provides 3.11 only, and with "
        "docker_image the image's own Python runs (leave this out)",
    )
    workdir: str = Field(
        default="/workspace",
        max_length=256,
        description="where the repository is mounted in the sandbox: an absolute, normalized "
        "path outside /env, /tmp, /proc, /sys, /dev, /etc, /usr and /home/runner",
    )
    network_policy: Literal["none", "setup_only", "always"] = "none"
    cpu_limit: Float = Field(default=2, gt=0, le=64)
    mem_limit_mb: Int = Field(default=4096, ge=64, le=1_048_576)
    pids_limit: Int = Field(default=512, ge=16, le=100_000)
    disk_limit_mb: Int = Field(
        default=2048,
        ge=16,
        le=1_048_576,
        description="size limit of the workspace (the repository, .git included), in MiB, "
        "enforced by the sandbox",
    )
    timeout_sec: Float = Field(
        default=900,
        gt=0,
        le=DAY_SEC,
        description="the agent's own time, counted from when it gets control "
        "(checkout, setup and baseline do not count against it)",
    )
    tool_timeout_sec: Float = Field(
        default=120, gt=0, le=DAY_SEC, description="per tool/command budget"
    )
    setup_timeout_sec: Float = Field(default=600, gt=0, le=DAY_SEC)

    @field_validator("python")
    @classmethod
    def _python_provided(cls, value: str, info: ValidationInfo) -> str:
        """Only a version the sandbox runs is accepted: no task silently gets another one.
        Validated only when given (the default is not)."""
        if info.data.get("docker_image"):
            raise ValueError("cannot be chosen with docker_image (the image's own Python "
                             "runs): leave python out")
        if value not in RUNNER_PYTHONS:
            raise ValueError(f"{value!r} is not provided by the runner image (supported: "
                             f"{', '.join(RUNNER_PYTHONS)}); for another version name an image "
                             "that has it in environment.docker_image and leave python out")
        return value

    @field_validator("workdir")
    @classmethod
    def _safe_workdir(cls, value: str) -> str:
        problem = workdir_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class SetupSpec(Strict):
    commands: list[Text] = Field(default_factory=list, max_length=MAX_ITEMS)
    capture: list[Text] = Field(default_factory=list, max_length=MAX_ITEMS)


class ValidationSpec(Strict):
    failing_command: Text = Field(min_length=1)
    passing_command: Text = Field(min_length=1)
    expected_exit_codes: list[ExitCode] | None = Field(default=None, max_length=256)
    expected_failure_regex: ShortText | None = None
    disallowed_failure_regex: ShortText | None = None
    expected_failing_tests: list[ShortText] | None = Field(default=None, max_length=MAX_ITEMS)
    baseline_runs: Int = Field(default=2, ge=1, le=5)
    hidden_tests: str | None = Field(
        default=None,
        max_length=MAX_PATH,
        description="a git patch of test files (e.g. tests.patch), relative to task.yaml, that "
        "the agent never sees: applied for the baseline and at scoring, where it wins over the "
        "agent's edits to the same files (core/hidden_tests.py)",
    )
    results: Literal["auto", "junit", "exit_code"] = Field(
        default="auto",
        description="the evidence scoring requires: junit (a JUnit XML report written where the "
        "tests cannot reach), exit_code (the exit status observed by the engine), or auto "
        "(junit results when the command runs pytest, else the exit code)",
    )

    @field_validator("expected_failure_regex", "disallowed_failure_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            _compile(value)
        return value

    @field_validator("hidden_tests")
    @classmethod
    def _inside_task_dir(cls, value: str | None) -> str | None:
        problem = relative_path_problem(value) if value is not None else None
        if problem is not None:
            raise ValueError(problem)
        return value


class AgentSpec(Strict):
    entrypoint: ShortText | None = Field(
        default=None,
        description="not supported: the agent is the run's --agentbench-variant; any value is "
        "refused (kept in the schema for that one clear line)",
    )
    max_steps: Int = Field(default=30, ge=1, le=100_000)
    allow_file_write: bool = Field(
        default=True,
        description="false takes write_file and remove_file from the agent's tools (apply_patch "
        "and run stay)",
    )
    editable_globs: list[ShortText] | None = Field(default=None, max_length=MAX_ITEMS)
    readonly_globs: list[ShortText] = Field(default_factory=list, max_length=MAX_ITEMS)
    max_changed_files: Int | None = Field(default=None, ge=1, le=1_000_000)
    max_lines_changed: Int | None = Field(default=None, ge=1, le=100_000_000)
    forbidden_commands: list[ShortText] = Field(default_factory=list, max_length=MAX_ITEMS)
    protect_test_infra: bool = Field(
        default=True,
        description="conftest.py files, pytest.ini, tox.ini, the pytest sections of "
        "pyproject.toml and setup.cfg, and the tests failing_command/passing_command run are "
        "read-only for the agent unless this is false (core/protection.py)",
    )

    @field_validator("entrypoint")
    @classmethod
    def _no_entrypoint(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError("not supported: the agent is chosen per run "
                             "(--agentbench-variant), not per task; remove this field")
        return value

    @field_validator("forbidden_commands")
    @classmethod
    def _patterns_compile(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                _compile(pattern)
            except ValueError as exc:
                raise ValueError(f"{pattern!r}: {exc}") from None
        return value


class ArtifactsSpec(Strict):
    keep_workspace: bool = False
    redact: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,255}$")]] = Field(
        default_factory=list, max_length=MAX_ITEMS
    )


class OracleSpec(Strict):
    patch: str = Field(
        default="oracle.patch",
        max_length=MAX_PATH,
        description="the reference fix: a regular file inside the task directory, relative to "
        "task.yaml",
    )

    @field_validator("patch")
    @classmethod
    def _inside_task_dir(cls, value: str) -> str:
        problem = relative_path_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class TaskSpec(Strict):
    task_spec_version: Literal[1]
    id: str = Field(pattern=TASK_ID_PATTERN)
    suite: str = Field(pattern=TASK_ID_PATTERN)
    harness_min_version: str | None = Field(default=None, pattern=r"^\d{1,6}(\.\d{1,6}){0,2}$")
    description: Text = ""
    labels: list[Annotated[str, Field(min_length=1, max_length=128)]] = Field(
        default_factory=list, max_length=MAX_ITEMS
    )
    quarantine: ShortText | None = Field(
        default=None, description="reason; the task is quarantined"
    )
    repo: RepoSpec
    environment: EnvironmentSpec = Field(default_factory=EnvironmentSpec)
    setup: SetupSpec = Field(default_factory=SetupSpec)
    validation: ValidationSpec
    agent: AgentSpec = Field(default_factory=AgentSpec)
    artifacts: ArtifactsSpec = Field(default_factory=ArtifactsSpec)
    oracle: OracleSpec = Field(default_factory=OracleSpec)

    @property
    def quarantine_reason(self) -> str | None:
        """Quarantined by an explicit reason or by the conventional `flaky` label."""
        if self.quarantine:
            return self.quarantine
        if "flaky" in self.labels:
            return "labelled flaky"
        return None


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])
