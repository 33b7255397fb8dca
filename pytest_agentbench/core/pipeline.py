"""One attempt: prepare → setup → baseline → agent → score → record.

Knows nothing of pytest or Docker: it talks to a SandboxFactory, a mirror cache and an Agent.
Whatever happens (short of Ctrl-C) it returns an AttemptRecord with exactly one primary reason
code for a non-pass. The phases live in before_agent.py (checkout, setup, baseline),
agent_phase.py and score_phase.py; what they share in attempt.py.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from typing import TYPE_CHECKING

import pytest_agentbench.core.agent_phase as agent_phase
import pytest_agentbench.core.before_agent as before_agent
import pytest_agentbench.core.score_phase as score_phase
from pytest_agentbench.agents.port import Agent
from pytest_agentbench.core.attempt import Attempt, Failure
from pytest_agentbench.core.attempt_config import AttemptConfig
from pytest_agentbench.core.attempt_record import build_record
from pytest_agentbench.core.keep import keep_workspace
from pytest_agentbench.core.rundir import write_json
from pytest_agentbench.core.scoring import sandbox_exit
from pytest_agentbench.paths.trees import remove_tree
from pytest_agentbench.repos.gitcmd import RepoError
from pytest_agentbench.sandbox.port import (
    EngineLost,
    Sandbox,
    SandboxError,
    SandboxExited,
    SandboxFactory,
)
from pytest_agentbench.schemas.events import TaskFinished, TaskStarted, utc_now
from pytest_agentbench.schemas.records import AttemptRecord, Result
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.tasks.fingerprint import write_fingerprint

if TYPE_CHECKING:
    from pytest_agentbench.core.recording import RecordingToolbox
    from pytest_agentbench.repos.mirror import MirrorCache
    from pytest_agentbench.tasks.loader import LoadedTask


class AttemptPipeline:
    def __init__(
        self,
        task: LoadedTask,
        cfg: AttemptConfig,
        sandboxes: SandboxFactory,
        mirrors: MirrorCache,
        agent: Agent,
    ) -> None:
        self.at = Attempt(task, cfg, sandboxes, getattr(agent, "needs", None))
        self.cfg, self.mirrors, self.agent = cfg, mirrors, agent

    def run(self) -> AttemptRecord:
        at = self.at
        started_at, start = utc_now(), time.monotonic()
        at.events.emit(TaskStarted(variant=self.cfg.shared.variant, worker=self.cfg.shared.worker))
        frozen = self.cfg.redact(at.task.raw_text)
        at.paths.root.joinpath("task.yaml").write_text(frozen, "utf-8")
        write_fingerprint(at.task.task_dir, at.paths.root)  # reports match validations by it
        try:
            result = self._pipeline()
        except Failure as failure:
            result = Result(
                passed=False,
                failure_reason=failure.reason,
                sub_reason=failure.sub_reason,
                summary=failure.summary,
            )
        except SandboxExited as exc:
            result = self._exited_result(exc)
        except RepoError as exc:
            result = Result(
                passed=False,
                failure_reason=Reason.SETUP_FAILED,
                sub_reason="REPO",
                summary=str(exc),
            )
        except SandboxError as exc:
            result = Result(
                passed=False,
                failure_reason=Reason.SANDBOX_ERROR,
                sub_reason="ENGINE_LOST" if self._engine_lost(exc) else None,
                summary=f"sandbox failed: {exc}",
            )
        except Exception as exc:  # a harness bug must still yield a record
            at.paths.log("harness_error.txt").write_text(
                self.cfg.redact(traceback.format_exc()), "utf-8"
            )
            result = Result(
                passed=False,
                failure_reason=Reason.SANDBOX_ERROR,
                sub_reason="HARNESS_ERROR",
                summary=f"harness error: {type(exc).__name__}: {exc}",
            )
        finally:
            self._teardown()
        duration = time.monotonic() - start
        at.events.emit(
            TaskFinished(
                passed=result.passed,
                failure_reason=result.failure_reason,
                duration_ms=int(duration * 1000),
            )
        )
        record = build_record(
            self.cfg,
            at.spec,
            at.attempt_id,
            at.found,
            result,
            started_at=started_at,
            duration=duration,
            artifacts_dir=at.paths.rel.as_posix(),
        )
        write_json(at.paths.root / "meta" / "timings.json", at.found.timings)
        write_json(at.paths.root / "meta" / "environment.json", at.environment)
        return record

    def _pipeline(self) -> Result:
        at = self.at
        with at.phase_timer("prepare"):
            before_agent.prepare(at, self.mirrors)
        sandbox = before_agent.setup(at)
        with at.phase_timer("baseline"):
            agent_phase.open_pristine(at)
            before_agent.baseline(at, sandbox)
        with at.phase_timer("agent"):
            toolbox = agent_phase.run_agent(at, sandbox, self.agent)
        return self._score(sandbox, toolbox)

    def _score(self, sandbox: Sandbox, toolbox: RecordingToolbox) -> Result:
        """The last phase (a subclass may do more around it: run/adequacy.py)."""
        with self.at.phase_timer("score"):
            return score_phase.score(self.at, sandbox, toolbox)

    def _engine_lost(self, exc: SandboxError) -> bool:
        """The sandbox failed because its engine stopped answering: said by the error, or (a
        backstop for any other path) by the factory's own check, when it has one."""
        if isinstance(exc, EngineLost):
            return True
        answers = getattr(self.at.sandboxes, "engine_answers", None)
        return answers is not None and not answers()

    def _exited_result(self, exc: SandboxExited) -> Result:
        """A sandbox stopped while the engine answers; whose it is: scoring.sandbox_exit."""
        at = self.at
        if at.phase == "agent" and at.toolbox is not None:
            where = f"during or after the agent's step {at.toolbox.step}"
        else:
            where = f"in the {at.phase} phase"
        reason, sub, summary = sandbox_exit(at.phase, exc, where)
        return Result(passed=False, failure_reason=reason, sub_reason=sub, summary=summary)

    def _teardown(self) -> None:
        at = self.at
        if at.score_ahead is not None:  # opened for a scoring that never came
            at.score_ahead.discard()
        if at.toolbox is not None:  # its snapshot git dir, if scoring did not remove it
            with contextlib.suppress(Exception):
                at.toolbox.close()
        for sandbox in at.open_sandboxes:
            with contextlib.suppress(Exception):  # the label sweep is the backstop
                sandbox.close()
        repo = at.workspace / "repo"
        if self.cfg.keep_workspace and repo.is_dir():
            # An inert copy, never a move: no .git at any depth, no FIFO, no symlink out
            # (core/keep.py). final.patch has the diff.
            report = keep_workspace(repo, at.paths.root / "repo")
            at.environment["kept_workspace"] = report.to_dict()
        for name in at.disk_modes:  # after the keep: it copies from the mount
            with contextlib.suppress(SandboxError):
                at.sandboxes.release(at.workspace / name)
        at.release_cache()  # after the views of the entry are gone
        if at.gateway_dir is not None:
            remove_tree(at.gateway_dir)
        problems = remove_tree(at.workspace)  # iterative: a 2000-level tree cannot stop us
        if problems:
            at.environment["workspace_cleanup"] = problems[:50]


__all__ = ["AttemptPipeline"]
