"""Task spec v1: the schema of `taskpacks/<suite>/<task>/task.yaml`.

Strict on purpose (extra="forbid"): a typo must fail loudly instead of silently changing behaviour.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

TASK_SPEC_VERSION = 1
TASK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RepoSpec(Strict):
    url: str = Field(
        min_length=1,
        description="any URL git understands, or a path relative to "
        "task.yaml of a git bundle or bare repository shipped in the taskpack",
    )
    commit: str = Field(pattern=r"^[0-9a-f]{7,40}$", description="pinned commit sha (hex)")


class EnvironmentSpec(Strict):
    docker_image: str | None = None  # None: the harness's runner image
    python: str = "3.11"
    workdir: str = "/workspace"
    network_policy: Literal["none", "setup_only", "always"] = "none"
    cpu_limit: float = Field(default=2, gt=0, le=64)
    mem_limit_mb: int = Field(default=4096, ge=64)
    pids_limit: int = Field(default=512, ge=16)
    timeout_sec: float = Field(default=900, gt=0, description="whole-task budget")
    tool_timeout_sec: float = Field(default=120, gt=0, description="per tool/command budget")
    setup_timeout_sec: float = Field(default=600, gt=0)


class SetupSpec(Strict):
    commands: list[str] = Field(default_factory=list)
    capture: list[str] = Field(default_factory=list)


class ValidationSpec(Strict):
    failing_command: str = Field(min_length=1)
    passing_command: str = Field(min_length=1)
    expected_exit_codes: list[int] | None = None
    expected_failure_regex: str | None = None
    disallowed_failure_regex: str | None = None
    expected_failing_tests: list[str] | None = None
    baseline_runs: int = Field(default=2, ge=1, le=5)

    @field_validator("expected_failure_regex", "disallowed_failure_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from exc
        return value


class AgentSpec(Strict):
    entrypoint: str | None = None  # default agent for this task; the CLI variant wins
    max_steps: int = Field(default=30, ge=1)
    allow_file_write: bool = True
    editable_globs: list[str] | None = None
    readonly_globs: list[str] = Field(default_factory=list)
    max_changed_files: int | None = Field(default=None, ge=1)
    max_lines_changed: int | None = Field(default=None, ge=1)
    forbidden_commands: list[str] = Field(default_factory=list)

    @field_validator("forbidden_commands")
    @classmethod
    def _patterns_compile(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a valid regular expression: {exc}") from exc
        return value


class ArtifactsSpec(Strict):
    keep_workspace: bool = False
    redact: list[str] = Field(default_factory=list)


class OracleSpec(Strict):
    patch: str = "oracle.patch"  # relative to task.yaml


class TaskSpec(Strict):
    task_spec_version: Literal[1]
    id: str = Field(pattern=TASK_ID_PATTERN)
    suite: str = Field(pattern=TASK_ID_PATTERN)
    harness_min_version: str | None = Field(default=None, pattern=r"^\d+(\.\d+){0,2}$")
    description: str = ""
    labels: list[str] = Field(default_factory=list)
    quarantine: str | None = Field(default=None, description="reason; the task is quarantined")
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
