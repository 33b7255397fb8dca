"""The one place an attempt is assembled: `SharedAttemptConfig` (what every attempt of a run
shares) plus `AttemptFactory` (one task attempt -> its AttemptConfig, or its redacted record), and
`sandbox_factory(kind)`, the one docker/local choice.

Every entry point goes through here, and passes:

- the pytest plugin (`plugin/fixtures.py`): the run's id, directory and session token, the
  variant and its config hash, the checked runner image, the worker id and its event file
  (`worker_events_path`), the command-line options (full logs, keep workspace, CA bundle, env
  cache), the variant's agent parameters and the run's redactor (every task's secrets); per
  attempt the task, its index, the run's attempt count and the quarantine reason;
- `agentbench replay`: a `replay-<stamp>` run in `RUN_DIR/replays/...`, the recorded variant
  hash and attempt index, the current runner image, an event file of its own and no redactor
  (each attempt then gets `Redactor.for_task`);
- `agentbench validate-tasks --run` and `agentbench doctor`: a throwaway run per agent (oracle,
  nop) through `run/validation.py`, no event file, no redactor.

Redaction: an attempt is redacted with `shared.redactor` when given (the plugin's covers every
task of the run), else with `Redactor.for_task(task.spec)`; either way the task's own secrets
(repo.url credentials, `artifacts.redact`, secret `$NAME`s its commands use) are covered.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agentbench.agents.port import Agent
from pytest_agentbench.core.attempt_config import AttemptConfig, SharedAttemptConfig
from pytest_agentbench.core.pipeline import AttemptPipeline
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.run.engine_pool import EnginePool
from pytest_agentbench.run.infra_retry import run_with_retries
from pytest_agentbench.sandbox.port import SandboxFactory
from pytest_agentbench.tasks.loader import LoadedTask
from pytest_agentbench.text.redaction import Redactor


def worker_events_path(run_dir: Path, session: str, worker: str) -> Path:
    """A plugin worker's event file; the controller merges `events/*.jsonl` at the run's end."""
    return run_dir / "events" / f"{session}-{worker}.jsonl"


def sandbox_factory(kind: str) -> SandboxFactory:
    """The sandbox adapter for `--sandbox docker|local` (imported only when chosen)."""
    if kind == "local":
        from pytest_agentbench.sandbox.local import LocalSandboxFactory

        return LocalSandboxFactory()
    if kind != "docker":
        raise ValueError(f"unknown sandbox kind {kind!r} (expected docker or local)")
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    return DockerSandboxFactory()


class AttemptFactory:
    """Attempts of one run: `config(...)` is an attempt's AttemptConfig; `run(...)` runs the
    attempt through an `AttemptPipeline` (a fresh agent from `agent` each time) and returns its
    record as a redacted JSON dict."""

    def __init__(
        self,
        shared: SharedAttemptConfig,
        sandboxes: SandboxFactory | EnginePool,
        mirrors: MirrorCache,
        agent: Callable[[], Agent],
        retry_infra: int = 0,
    ) -> None:
        """`sandboxes`: one factory, or the run's pool of Docker engines (run/engine_pool.py)."""
        self.engines = sandboxes if isinstance(sandboxes, EnginePool) else None
        self.sandboxes: SandboxFactory = sandboxes  # type: ignore[assignment]
        self.mirrors, self.make_agent, self.retry_infra = mirrors, agent, retry_infra
        self.shared = shared
        self._for_task: tuple[Any, Redactor] | None = None  # the last task's own redactor

    def redactor(self, task: LoadedTask) -> Redactor:
        """The run's redactor, or (when it has none) one for the task's own secrets."""
        if self.shared.redactor is not None:
            return self.shared.redactor
        if self._for_task is None or self._for_task[0] is not task.spec:
            self._for_task = (task.spec, Redactor.for_task(task.spec))
        return self._for_task[1]

    def config(
        self,
        task: LoadedTask,
        index: int = 0,
        attempts: int = 1,
        quarantined: str | None = None,
        keep_workspace: bool | None = None,
    ) -> AttemptConfig:
        """The attempt's AttemptConfig. `attempts` > 1 gives each its own `attempt-N` directory;
        `keep_workspace` None keeps it when the run or the task asks for it."""
        s, redactor = self.shared, self.redactor(task)
        if keep_workspace is None:
            keep_workspace = s.keep_workspace or task.spec.artifacts.keep_workspace
        return AttemptConfig(
            s, attempt_index=index,
            attempt_label=f"attempt-{index + 1}" if attempts > 1 else None,
            keep_workspace=keep_workspace, quarantined=quarantined,
            redact=redactor.redact, redact_obj=redactor.redact_obj,
        )

    def run(
        self,
        task: LoadedTask,
        index: int = 0,
        attempts: int = 1,
        quarantined: str | None = None,
        keep_workspace: bool | None = None,
    ) -> dict[str, Any]:
        """Run the attempt; its record redacted (identity fields kept) before anyone sees it.
        With an engine pool, each try leases an engine, and a try that lost its engine is run
        again elsewhere up to `retry_infra` times (run/infra_retry.py)."""
        cfg = self.config(task, index, attempts, quarantined, keep_workspace)

        def run_try(sandboxes: SandboxFactory) -> dict[str, Any]:
            pipeline = AttemptPipeline(task, cfg, sandboxes, self.mirrors, self.make_agent())
            pipeline.at.events.listener = cfg.shared.event_listener  # before its first event
            return self.redactor(task).redact_record(pipeline.run().to_json_dict())

        if self.engines is None:
            return run_try(self.sandboxes)
        return run_with_retries(self.engines, self.retry_infra, run_try, cfg.shared.run_dir)
