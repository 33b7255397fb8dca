"""The attempt record: one line of `attempts.jsonl` per attempt (versioned).

Plain JSON types only, so the record can ride on a pytest report across xdist workers.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pytest_agentbench.schemas.taxonomy import Reason

RECORD_VERSION: Literal[1] = 1

PytestOutcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]


def attempt_key(task_id: str, attempt_index: int) -> str:
    """The one name of an attempt within a run: `<task_id>#<attempt_index>`."""
    return f"{task_id}#{attempt_index}"


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelInfo(Record):
    provider: str
    name: str
    base_url: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    prompt_version: str | None = None
    preset_registry_version: str | None = None
    config_sources: dict[str, str] = Field(default_factory=dict)


class RoleUsage(Record):
    """What one role of a multi-role agent (the `subagents` variant's router, searcher...)
    spent on model calls."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None


class Usage(Record):
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None
    retries: int = 0
    llm_latency_ms: int = 0
    fallback_tool_calls: int = 0
    # per role, for agents made of several roles (subagents); the totals above are their sums.
    # Empty for single-role agents and in records written before it.
    by_role: dict[str, RoleUsage] = Field(default_factory=dict)


class Timestamps(Record):
    started_at: str
    ended_at: str


class BaselineRun(Record):
    exit_code: int
    timed_out: bool = False
    duration_sec: float
    stdout_sha256: str
    stderr_sha256: str
    signature: list[str]  # normalized failure signature (failing test ids, or a digest)


class BaselineValidation(Record):
    attempted: bool = False
    failed_as_expected: bool | None = None
    exit_code: int | None = None
    runs: list[BaselineRun] = Field(default_factory=list)
    is_flaky: bool = False
    flake_check_runs: int = 0
    flake_failure_modes: list[list[str]] = Field(default_factory=list)
    signature: list[str] = Field(default_factory=list)
    duration_sec: float | None = None  # all baseline runs; None in records written before it


class SetupInfo(Record):
    attempted: bool = False
    ok: bool | None = None
    duration_sec: float = 0.0  # the setup phase, snapshot restore included (0.0 before it was set)
    commands: int = 0
    network: bool = False
    diff_stat: str = ""
    dirty_files: list[str] = Field(default_factory=list)
    reused_snapshot: bool = False
    # the environment cache: "off" (no cache, or no setup commands), "hit", "hit_after_wait"
    # (another worker built it meanwhile), "built" (this attempt's setup is now cached),
    # "not_saved" (environment.json says why)
    env_cache: str = "off"
    env_cache_wait_sec: float = 0.0  # waiting for another worker's build of the same key


class RegradeRun(Record):
    """One more run of the passing command on the attempt's final state, in a fresh sandbox
    under another hash seed (`--agentbench-regrade N`, core/regrade.py)."""

    index: int = Field(ge=1)  # 1..N
    hash_seed: str  # the PYTHONHASHSEED it ran under (the grading's is "0")
    passed: bool  # this run's verdict, by the grading's rules
    exit_code: int
    timed_out: bool = False
    sub_reason: str | None = None  # a TESTS_FAILED sub-reason (results contradict exit 0, ...)
    signature: list[str] = Field(default_factory=list)  # failing tests, when it failed
    duration_sec: float  # the passing command's own run
    wall_sec: float  # the whole regrade: fresh copy, sandbox, the diff, the command, teardown


class Result(Record):
    passed: bool
    exit_code: int | None = None
    failure_reason: Reason | None = None
    sub_reason: str | None = None
    summary: str = ""
    signature: list[str] = Field(default_factory=list)  # failing tests after the agent
    tests_passed: int | None = None
    tests_failed: int | None = None
    # --agentbench-regrade: the passing command re-run on the same final state, in order. Any
    # that disagrees with the grading makes the attempt VERIFIER_FLAKY, or TESTS_FAILED
    # (FLAKY_FIX) when the task's reference solution passes under every seed (core/regrade.py).
    # Empty without regrades (and in records written before them).
    regrades: list[RegradeRun] = Field(default_factory=list)
    # A task with hidden tests (validation.hidden_tests): the paths they touch where the agent's
    # edits were discarded before they were applied, [] when it made none there. None: the task
    # has no hidden tests (or scoring never applied them).
    hidden_tests_overrode: list[str] | None = None


class AgentStats(Record):
    steps: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    patches_rejected: int = 0
    # hunks of applied patches whose @@ counts were wrong and recounted from the body (the
    # patch tool accepts them as `git apply --recount` does): a comparison can see how often
    hunks_recounted: int = 0
    edits_refused: int = 0
    changed_files: list[str] = Field(default_factory=list)
    lines_changed: int = 0
    finished_by: str | None = None  # finish | max_steps | stuck | budget | error | done


class Limits(Record):
    timeout_sec: float
    tool_timeout_sec: float
    max_steps: int
    cpu_limit: float
    mem_limit_mb: int
    budgets: dict[str, float | int | None] = Field(default_factory=dict)
    # The time the agent had, from when it got control to its deadline (setup, baseline and
    # the harness's preparation not counted). None: the agent never started, or a record
    # written before agents had a clock of their own (their time began with the attempt).
    agent_time_limit_sec: float | None = None
    # The resource policy the agent's and the scoring sandboxes ran under (setup runs at the
    # task's own limits): cpu_limit and mem_limit_mb above are the values applied, after
    # `resources_scale` (--agentbench-resources-scale). None: a record written before these
    # fields (unknown, never compared). mem_reservation_mb None: no reservation (soft limit) set.
    pids_limit: int | None = None
    disk_limit_mb: int | None = None
    mem_reservation_mb: int | None = None
    resources_scale: float | None = None
    # Commands (and sandboxes) of the attempt in which the kernel's OOM killer struck; None: not
    # counted (older records, an attempt whose worker died).
    oom_kills: int | None = None


class ImageInfo(Record):
    name: str
    id: str | None = None
    digest: str | None = None


class InfraTry(Record):
    """An earlier try of an attempt, ended by the infrastructure (its engine lost) and run
    again elsewhere (`--agentbench-retry-infra`): what happened, where, and where its
    artifacts are. The attempt's record describes its last try; these are the ones before."""

    engine: str
    failure_reason: Reason
    sub_reason: str | None = None
    summary: str = ""
    duration_sec: float = 0.0
    artifacts_dir: str | None = None
    usage: Usage | None = None  # what the try spent on a model before its engine was lost


class AttemptRecord(Record):
    record_version: Literal[1] = RECORD_VERSION
    run_id: str
    attempt_id: str
    task_id: str
    suite: str
    variant: str
    variant_config_hash: str
    attempt_index: int = Field(ge=0)
    task_spec_version: int
    task_commit: str
    harness_version: str
    worker: str = "master"
    quarantined: str | None = None
    model: ModelInfo | None = None
    usage: Usage | None = None
    timestamps: Timestamps
    duration_sec: float
    timings: dict[str, float] = Field(default_factory=dict)
    setup: SetupInfo = Field(default_factory=SetupInfo)
    baseline_validation: BaselineValidation = Field(default_factory=BaselineValidation)
    agent: AgentStats = Field(default_factory=AgentStats)
    result: Result
    limits: Limits
    image: ImageInfo | None = None
    pytest_outcome: PytestOutcome | None = None
    artifact_paths: dict[str, str] = Field(default_factory=dict)
    engine: str | None = None  # the Docker engine the (last) try ran on; None: local sandbox
    retried: list[InfraTry] = Field(default_factory=list)  # earlier tries, oldest first

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
