"""What one attempt runs with: the run's shared part (ids, paths, image, caches, agent
parameters) and the attempt's own (its index, workspace keeping, quarantine, redaction)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentbench.core.envcache import EnvCache
from pytest_agentbench.core.event_sink import EventListener
from pytest_agentbench.sandbox.port import SESSION_LABEL, ExtraMount, SandboxSpec
from pytest_agentbench.schemas.task import EnvironmentSpec, TaskSpec
from pytest_agentbench.text.redaction import Redactor
from pytest_agentbench.version import harness_version


@dataclass(frozen=True)
class SharedAttemptConfig:
    """What every attempt of one run (one worker, one variant) has in common: made once per run
    by its entry point (the plugin, validate-tasks, harvest, replay, doctor), never copied."""

    run_id: str
    run_dir: Path
    work_root: Path  # per-attempt checkouts live under it while they run
    variant: str  # the variant's name, part of every attempt id
    variant_config_hash: str
    image: str = "local"  # the runner image's name ("local" for the local sandbox)
    image_id: str | None = None
    image_digest: str | None = None
    session: str = ""  # the pytest session's token: a resumed attempt gets a new attempt id
    worker: str = "master"
    events_path: Path | None = None  # where the attempts' events go; None: nowhere
    full_logs: bool = False
    keep_workspace: bool = False  # keep every workspace (a task may ask for its own, too)
    ca_bundle: Path | None = None  # mounted into networked setup sandboxes
    pip_cache: Path | None = None  # root of the per-task pip caches
    env_cache: EnvCache | None = None  # post-setup snapshots; None: always run setup
    owner_uid: int | None = None  # who gets the workspace (the sandbox user under a root harness)
    redactor: Redactor | None = None  # None: each attempt gets Redactor.for_task(its spec)
    agent_params: Mapping[str, Any] = field(default_factory=dict)
    harness_version: str = field(default_factory=harness_version)
    event_listener: EventListener | None = None  # sees each event as written (live progress)
    regrade: int = 0  # re-runs of the passing command on the final state (core/regrade.py)
    # --agentbench-resources-scale: CPU and memory limits of every sandbox but setup's, times
    # this (scaled_resources); 1.0: the task's own
    resources_scale: float = 1.0


@dataclass(frozen=True)
class AttemptConfig:
    """One attempt's configuration: the run's shared part, and what is the attempt's own."""

    shared: SharedAttemptConfig
    attempt_index: int = 0
    attempt_label: str | None = None  # its directory under tasks/<id>/ when a task has several
    keep_workspace: bool = False  # the run's choice or the task's
    quarantined: str | None = None
    redact: Callable[[str], str] = field(default=lambda text: text)
    redact_obj: Callable[[Any], Any] = field(default=lambda obj: obj)


def attempt_id(run_id: str, task_id: str, variant: str, index: int, session: str = "") -> str:
    return f"{run_id}:{task_id}:{variant}:{index}" + (f"@{session}" if session else "")


# The floors of a scaled limit: Docker's smallest CPU quota, and the task schema's smallest
# memory limit (a container below a few MiB cannot start its init process).
MIN_CPU = 0.01
MIN_MEM_MB = 64


def scaled_resources(env: EnvironmentSpec, scale: float) -> tuple[float, int]:
    """The CPU and memory limits a sandbox gets under `scale` (--agentbench-resources-scale):
    the task's, times `scale`, CPU to 0.01 of a core and memory to whole MiB, never below the
    floors. The pids and disk limits are not scaled: they bound what a runaway command can do
    (fork bombs, a full disk), not how fast the tests run, and a scaled-down pids limit turns a
    test that forks into an error of its own kind."""
    if scale == 1.0:
        return env.cpu_limit, env.mem_limit_mb
    return (max(MIN_CPU, round(env.cpu_limit * scale, 2)),
            max(MIN_MEM_MB, int(round(env.mem_limit_mb * scale))))


def pip_cache_dir(root: Path, spec: TaskSpec) -> Path:
    """The task's own pip cache under the shared root: one task's setup cannot poison what
    another task installs (a task and its attempts share theirs). Keyed by suite, task id and
    repository URL, hashed (the URL may hold credentials)."""
    blob = "\n".join((spec.suite, spec.id, spec.repo.url)).encode()
    return root / f"{spec.id}-{hashlib.sha256(blob).hexdigest()[:12]}"


def sandbox_spec(
    cfg: AttemptConfig, spec: TaskSpec, workspace: Path, network: bool, phase: str,
    env_dir: Path | None = None, *, repo_dir: str | None = None,
    extra_env: dict[str, str] | None = None, extra_mounts: tuple[ExtraMount, ...] = (),
) -> SandboxSpec:
    """setup: /env writable, the task's pip cache, CA bundle if networked. agent and score:
    /env read-only and no cache, so nothing the agent does outlives its own sandbox. Every
    phase: the workspace's disk limit. `repo_dir`: the workspace directory mounted, when not
    the phase's own (`repo`, `pristine` for score; a regrade's fresh copy); `extra_env`: over
    the deterministic envelope (a regrade's PYTHONHASHSEED)."""
    env = spec.environment
    setup = phase == "setup"
    # setup runs at the task's own limits: the env-cache key names them (core/envcache.py), so
    # a scaled run reuses what an unscaled setup built, and a setup is never what the scale
    # measures; every later sandbox (baseline, agent, score, regrade) gets the scaled ones
    cpu, mem = (env.cpu_limit, env.mem_limit_mb) if setup else scaled_resources(
        env, cfg.shared.resources_scale)
    return SandboxSpec(
        # a task may name its own local image; else the runner image by the id resolved when
        # the run began: its tag is shared by every checkout of the harness on this engine, and
        # another version's `image build` re-points it (a run saw PIP_USER come back mid-run)
        image=env.docker_image or cfg.shared.image_id or cfg.shared.image,
        workspace=workspace / (repo_dir or ("pristine" if phase == "score" else "repo")),
        env_dir=env_dir or workspace / "env",  # an env-cache entry's, read-only
        env_read_only=not setup,
        workdir=env.workdir,
        network=network,
        cpu_limit=cpu,
        mem_limit_mb=mem,
        pids_limit=env.pids_limit,
        # every phase one sandbox may see before the agent's own clock starts (setup, each
        # capture command, each baseline run, the results read), then the agent's time, then
        # slack for the pristine copy, protection scan and first snapshot: the dead-man's
        # switch must never be what ends an agent that still has time
        lifetime_sec=env.timeout_sec
        + env.setup_timeout_sec
        + (len(spec.setup.capture) + spec.validation.baseline_runs + 1) * env.tool_timeout_sec
        + 300,
        labels={
            "agentbench.run_id": cfg.shared.run_id,
            "agentbench.task_id": spec.id,
            "agentbench.worker": cfg.shared.worker,
            "agentbench.attempt": str(cfg.attempt_index),
            "agentbench.phase": phase,
            # two sessions may run under one run name at once (a named run in two projects):
            # each sweeps only its own containers
            **({SESSION_LABEL: cfg.shared.session} if cfg.shared.session else {}),
        },
        ca_bundle=cfg.shared.ca_bundle if network and setup else None,
        pip_cache=(pip_cache_dir(cfg.shared.pip_cache, spec)
                   if setup and cfg.shared.pip_cache else None),
        env=dict(extra_env or {}),
        full_logs=cfg.shared.full_logs,
        disk_limit_mb=getattr(env, "disk_limit_mb", 2048),
        # what the host reads after the sandbox closes: setup's results (the pristine copy,
        # the env cache, the next sandbox), the agent's workspace only when it is kept
        sync_back=setup or (phase == "agent" and cfg.keep_workspace),
        extra_mounts=extra_mounts,
    )
