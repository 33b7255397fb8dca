"""One attempt: prepare → setup → baseline → agent → score → record.

Knows nothing of pytest or Docker: it talks to a SandboxFactory, a mirror cache and an Agent.
Whatever happens (short of Ctrl-C) it returns an AttemptRecord with exactly one primary reason
code for a non-pass.
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from typing import Any

from pytest_agentbench.agents.port import Agent, AgentContext, AgentError, AgentOutcome
from pytest_agentbench.core import baseline as baseline_mod
from pytest_agentbench.core import evidence as evidence_mod
from pytest_agentbench.core.envcache import cache_key
from pytest_agentbench.core.events import EventSink, utc_now
from pytest_agentbench.core.gitops import (
    SnapshotError,
    apply_command,
    dirty_tracked_files,
    untracked_files,
)
from pytest_agentbench.core.keep import keep_workspace
from pytest_agentbench.core.phases import PhaseTimer
from pytest_agentbench.core.protection import protect, pytest_config_change
from pytest_agentbench.core.recording import RecordingToolbox
from pytest_agentbench.core.rundir import AttemptPaths, write_json
from pytest_agentbench.core.scoring import Evidence, sandbox_exit, verdict
from pytest_agentbench.core.trial_config import TrialConfig, attempt_id, sandbox_spec
from pytest_agentbench.core.trial_record import AttemptFindings, build_record
from pytest_agentbench.paths.host_files import HostFiles
from pytest_agentbench.paths.trees import copy_tree, remove_tree
from pytest_agentbench.repos import MirrorCache, RepoError, resolve_source
from pytest_agentbench.sandbox.port import (
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxExited,
    SandboxFactory,
)
from pytest_agentbench.schemas.events import (
    CommandFinished,
    Event,
    TaskFinished,
    TaskStarted,
)
from pytest_agentbench.schemas.records import AttemptRecord, Result, SetupInfo
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.tasks.loader import LoadedTask
from pytest_agentbench.text.signatures import sha256
from pytest_agentbench.tools.toolbox import Toolbox, ToolPolicy


class Failure(Exception):
    def __init__(self, reason: Reason, summary: str, sub_reason: str | None = None) -> None:
        super().__init__(summary)
        self.reason, self.summary, self.sub_reason = reason, summary, sub_reason


class Trial:
    def __init__(
        self,
        task: LoadedTask,
        cfg: TrialConfig,
        sandboxes: SandboxFactory,
        mirrors: MirrorCache,
        agent: Agent,
    ) -> None:
        self.task, self.spec, self.cfg = task, task.spec, cfg
        self.sandboxes, self.mirrors, self.agent = sandboxes, mirrors, agent
        self.attempt_id = attempt_id(
            cfg.run_id, self.spec.id, cfg.variant, cfg.attempt_index, cfg.session
        )
        self.paths = AttemptPaths(cfg.run_dir, self.spec.id, cfg.attempt_label)
        self.events = EventSink(
            cfg.events_path, cfg.run_id, self.spec.id, self.attempt_id, cfg.redact_obj
        )
        self.found = AttemptFindings(commit=self.spec.repo.commit)
        self.open_sandboxes: list[Sandbox] = []
        self.environment: dict[str, Any] = {}
        self.workspace = cfg.work_root / self.attempt_id.replace(":", "_")
        self.deadline = 0.0
        self.env_dir = self.workspace / "env"
        self.agent_overran = False
        self.toolbox: RecordingToolbox | None = None
        self.phase = "prepare"
        self.baseline_results: evidence_mod.TestEvidence | None = None
        self.disk_modes: dict[str, str] = {}  # workspace dir -> "filesystem" | "watched" | "none"

    # -- the pipeline ---------------------------------------------------------------------------
    def run(self) -> AttemptRecord:
        started_at, start = utc_now(), time.monotonic()
        self.deadline = start + self.spec.environment.timeout_sec
        self.events.emit(TaskStarted(variant=self.cfg.variant, worker=self.cfg.worker))
        frozen = self.cfg.redact(self.task.raw_text)
        self.paths.root.joinpath("task.yaml").write_text(frozen, "utf-8")
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
                passed=False, failure_reason=Reason.SANDBOX_ERROR, summary=f"sandbox failed: {exc}"
            )
        except Exception as exc:  # a harness bug must still yield a record
            self.paths.log("harness_error.txt").write_text(
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
        self.events.emit(
            TaskFinished(
                passed=result.passed,
                failure_reason=result.failure_reason,
                duration_ms=int(duration * 1000),
            )
        )
        record = build_record(
            self.cfg,
            self.spec,
            self.attempt_id,
            self.found,
            result,
            started_at=started_at,
            duration=duration,
            artifacts_dir=self.paths.rel.as_posix(),
        )
        write_json(self.paths.root / "meta" / "timings.json", self.found.timings)
        write_json(self.paths.root / "meta" / "environment.json", self.environment)
        return record

    def _pipeline(self) -> Result:
        with self._phase("prepare"):
            self._prepare()
        sandbox = self._setup()
        with self._phase("baseline"):
            self._baseline(sandbox)
        with self._phase("agent"):
            toolbox = self._agent(sandbox)
        with self._phase("score"):
            return self._score(sandbox, toolbox)

    # -- phases -----------------------------------------------------------------------------------
    def _prepare(self) -> None:
        source = resolve_source(self.spec.repo.url, self.task.task_dir)
        self.workspace.mkdir(parents=True, exist_ok=True)
        self._provision("repo")
        checkout = self.mirrors.checkout(
            source, self.spec.repo.commit, self.workspace / "repo", owner_uid=self.cfg.owner_uid
        )
        self.found.commit = checkout.commit
        self.env_dir.mkdir(exist_ok=True)
        if self.cfg.owner_uid is not None:
            os.chown(self.env_dir, self.cfg.owner_uid, self.cfg.owner_uid)
        self.environment["harness"] = {
            "version": self.cfg.harness_version,
            "image": self.cfg.image,
            "image_id": self.cfg.image_id,
            "image_digest": self.cfg.image_digest,
            "ca_bundle": str(self.cfg.ca_bundle) if self.cfg.ca_bundle else None,
            "pip_cache": str(self.cfg.pip_cache) if self.cfg.pip_cache else None,
            "network_policy": self.spec.environment.network_policy,
        }
        self.environment["repo"] = {
            "commit": checkout.commit,
            "fetched": checkout.fetched,
            "checkout_sec": round(checkout.seconds, 3),
        }

    def _provision(self, name: str) -> None:
        """A workspace directory bounded by the task's disk limit before anything lands in it."""
        limit = self.spec.environment.disk_limit_mb
        self.disk_modes[name] = self.sandboxes.provision(self.workspace / name, limit)
        self.environment["disk_limit"] = {"mb": limit, **self.disk_modes}

    def _open(self, network: bool, phase: str) -> Sandbox:
        with self._timed("sandbox_start"):
            sandbox = self.sandboxes.open(
                sandbox_spec(self.cfg, self.spec, self.workspace, network, phase)
            )
        self.open_sandboxes.append(sandbox)
        self.environment.setdefault("sandboxes", []).append(
            {"phase": phase, "network": network, "facts": sandbox.facts()}
        )
        return sandbox

    def _setup(self) -> Sandbox:
        policy = self.spec.environment.network_policy
        setup_net, agent_net = policy in ("setup_only", "always"), policy == "always"
        commands = self.spec.setup.commands
        with self._phase("setup"):
            self.found.setup = SetupInfo(attempted=True, commands=len(commands))
            key = self._env_cache_key() if commands else None
            if key and self.cfg.env_cache and self.cfg.env_cache.restore(key, self.env_dir):
                self.found.setup.reused_snapshot = True
                commands, setup_net = [], agent_net
            self.found.setup.network = setup_net and bool(commands)
            phase = "setup" if commands else "agent"
            sandbox = self._open(network=setup_net if commands else agent_net, phase=phase)
            self._run_setup_commands(sandbox, commands)
            for command in self.spec.setup.capture:
                self._exec(sandbox, "capture", command, self.spec.environment.tool_timeout_sec)
            dirty, stat = dirty_tracked_files(sandbox)
            self.found.setup.dirty_files, self.found.setup.diff_stat = dirty, stat
            self.paths.log("setup_diff_stat.txt").write_text(stat + "\n", "utf-8")
            if dirty:
                self.found.setup.ok = False
                raise Failure(
                    Reason.SETUP_DIRTY_WORKTREE,
                    f"setup changed tracked files: {', '.join(dirty[:5])}",
                )
            self.found.setup.ok = True
            if key and commands and self.cfg.env_cache:
                self._save_env_snapshot(sandbox, key)
        if commands:  # the agent never gets the setup sandbox (writable /env, caches, network)
            sandbox.close()
            sandbox = self._open(network=agent_net, phase="agent")
        return sandbox

    def _save_env_snapshot(self, sandbox: Sandbox, key: str) -> None:
        """A snapshot holds /env only: a setup that also left files in the workspace (an
        in-place build, an egg-info) would be incomplete on reuse, so it is not cached."""
        leftovers = untracked_files(sandbox)
        if leftovers:
            self.environment["env_cache"]["not_saved"] = (
                f"setup left files in the workspace: {', '.join(leftovers[:5])}"
            )
            return
        assert self.cfg.env_cache is not None
        self.cfg.env_cache.save(key, self.env_dir)

    def _run_setup_commands(self, sandbox: Sandbox, commands: list[str]) -> None:
        budget_end = time.monotonic() + self.spec.environment.setup_timeout_sec
        for command in commands:
            result = self._exec(sandbox, "setup", command, budget_end - time.monotonic())
            if result.disk_limit_exceeded:
                raise self._task_over_disk_limit(command)
            if not result.ok:
                self.found.setup.ok = False
                sub = "SETUP_TIMEOUT" if result.timed_out else "SETUP_COMMAND_FAILED"
                raise Failure(
                    Reason.SETUP_FAILED, f"setup command exited {result.exit_code}: {command}", sub
                )

    def _env_cache_key(self) -> str:
        key = cache_key(
            self.spec.setup.commands,
            self.spec.environment.network_policy,
            self.found.commit,
            self.spec.environment.docker_image or self.cfg.image_id or self.cfg.image,
        )
        self.environment["env_cache"] = {
            "key": key,
            "root": str(self.cfg.env_cache.root) if self.cfg.env_cache else None,
        }
        return key

    def _baseline(self, sandbox: Sandbox) -> None:
        validation = self.spec.validation
        results = []
        for i in range(validation.baseline_runs):
            path, env = self._results_env()
            results.append(self._exec(
                sandbox,
                "baseline",
                validation.failing_command,
                self.spec.environment.tool_timeout_sec,
                log="failing" if i == 0 else f"failing_run{i + 1}",
                env=env,
            ))
            if i == 0:  # what pytest reports before the agent (core/evidence.py)
                self.baseline_results, _ = self._collect_results(sandbox, path)
        for result in results:
            if result.disk_limit_exceeded:
                raise self._task_over_disk_limit(validation.failing_command)
        self.baseline_output = results[0]
        self.found.baseline, verdict = baseline_mod.evaluate(validation, results)
        if verdict.reason is not None:
            raise Failure(verdict.reason, verdict.summary, verdict.sub_reason)
        if validation.results == "junit" and self.baseline_results is None:
            raise Failure(  # else every attempt would fail RESULTS_MISSING, blamed on the agent
                Reason.SETUP_FAILED,
                "validation.results is junit, but failing_command left no pytest results "
                "(does it run pytest, without its own --junitxml or PYTEST_ADDOPTS?)",
                "RESULTS_MISSING",
            )

    def _protection(self, sandbox: Sandbox) -> tuple[list[str], frozenset[str]]:
        """Read-only globs and paths: the task's, plus its test infrastructure unless it opts
        out (core/protection.py)."""
        globs, paths = list(self.spec.agent.readonly_globs), frozenset[str]()
        if self.spec.agent.protect_test_infra:
            validation = self.spec.validation
            found = protect([validation.failing_command, validation.passing_command], sandbox.files)
            globs += [g for g in found.globs if g not in globs]
            paths = found.paths
        self.environment["readonly"] = {
            "globs": globs, "paths": sorted(paths)[:500], "path_count": len(paths)
        }
        return globs, paths

    def _agent(self, sandbox: Sandbox) -> RecordingToolbox:
        agent_spec = self.spec.agent
        readonly_globs, readonly_paths = self._protection(sandbox)
        policy = ToolPolicy(
            editable_globs=agent_spec.editable_globs,
            readonly_globs=readonly_globs,
            readonly_paths=readonly_paths,
            allow_file_write=agent_spec.allow_file_write,
            max_changed_files=agent_spec.max_changed_files,
            max_lines_changed=agent_spec.max_lines_changed,
            forbidden_commands=list(agent_spec.forbidden_commands),
            tool_timeout_sec=self.spec.environment.tool_timeout_sec,
        )
        self._provision("pristine")
        copy_tree(self.workspace / "repo", self.workspace / "pristine")  # scoring starts here
        inner = Toolbox(sandbox, policy, on_event=self._tool_event)
        toolbox = self.toolbox = RecordingToolbox(
            inner, sandbox, self.paths, self.events, self.cfg.redact, self.deadline
        )
        ctx = AgentContext(
            task=self.spec,
            task_dir=self.task.task_dir,
            toolbox=toolbox,
            events=self.events,
            failing_output=self.baseline_output.stdout[-20000:]
            + self.baseline_output.stderr[-4000:],
            failing_command=self.spec.validation.failing_command,
            deadline=self.deadline,
            max_steps=agent_spec.max_steps,
            params=self.cfg.agent_params,
            artifacts_dir=self.paths.root / "agent",
        )
        try:
            self.found.outcome = self.agent.run(ctx)
        except AgentError as exc:  # infrastructure (LLM_ERROR, ...): keep what was spent
            self.found.outcome = AgentOutcome(
                "error",
                exc.reason,
                exc.sub_reason,
                str(exc),
                model=getattr(exc, "model", None),
                usage=getattr(exc, "usage", None),
            )
        except SandboxError:
            raise
        except Exception as exc:
            self.paths.log("agent_error.txt").write_text(
                self.cfg.redact(traceback.format_exc()), "utf-8"
            )
            self.found.outcome = AgentOutcome(
                "error",
                Reason.AGENT_GAVE_UP,
                "AGENT_EXCEPTION",
                f"agent raised {type(exc).__name__}: {exc}",
            )
        self.agent_overran = time.monotonic() > self.deadline
        self.found.agent = toolbox.stats(self.found.outcome)  # refined with the diff in _score
        return toolbox

    def _score(self, agent_sandbox: Sandbox, toolbox: RecordingToolbox) -> Result:
        """The diff is the solution: it is applied to the pre-agent copy of the workspace and
        tested in a new sandbox, so nothing else the agent left behind (processes, /tmp, HOME,
        files it hid from git) can influence the verdict."""
        outcome = self.found.outcome or AgentOutcome("error")
        if outcome.reason in (Reason.LLM_ERROR, Reason.SANDBOX_ERROR):
            raise Failure(
                outcome.reason, outcome.summary or str(outcome.reason), outcome.sub_reason
            )
        try:
            violation = toolbox.final_diff_violation()
        except SnapshotError as exc:
            raise Failure(
                Reason.TOOL_ERROR, f"workspace unreadable: {exc}", "WORKSPACE_UNREADABLE"
            ) from exc
        if violation is None and self.spec.agent.protect_test_infra:
            pristine = HostFiles(self.workspace / "pristine")
            violation = pytest_config_change(pristine, agent_sandbox.files, toolbox.changed_files)
        self.found.agent = toolbox.stats(outcome)
        agent_sandbox.close()
        sandbox = self._open(
            network=self.spec.environment.network_policy == "always", phase="score"
        )
        if toolbox.final_patch:
            patch_file = self.workspace / "pristine" / ".git" / "agentbench-final.patch"
            patch_file.write_text(toolbox.final_patch, "utf-8")
            applied = sandbox.exec(
                apply_command(),
                timeout_sec=self.spec.environment.tool_timeout_sec,
            )
            if applied.disk_limit_exceeded:
                raise Failure(
                    Reason.TESTS_FAILED,
                    "the agent's diff does not fit the workspace disk limit "
                    f"({self.spec.environment.disk_limit_mb} MiB)",
                    "DISK_LIMIT_EXCEEDED",
                )
            if not applied.ok:
                raise Failure(
                    Reason.TOOL_ERROR,
                    "the agent's diff does not apply to the "
                    f"pre-agent workspace: {applied.stderr.strip()[-200:]}",
                    "DIFF_NOT_APPLICABLE",
                )
        return self._run_scored(sandbox, outcome, violation)

    def _run_scored(self, sandbox: Sandbox, outcome: AgentOutcome, violation: str | None) -> Result:
        """The passing command, its exit status as the sandbox observed it, and pytest's results
        read back from a file the test run was told to write (core/evidence.py)."""
        validation = self.spec.validation
        mode, before = validation.results, self.baseline_results
        # auto: required when pytest reported before the agent and the passing command runs it
        wanted = mode == "junit" or (
            mode == "auto"
            and before is not None
            and evidence_mod.runs_pytest(validation.passing_command)
        )
        path, env = self._results_env()
        result = self._exec(
            sandbox,
            "score",
            validation.passing_command,
            self.spec.environment.tool_timeout_sec,
            log="passing",
            env=env,
        )
        results, problem = self._collect_results(sandbox, path)
        evidence = Evidence(
            results=results,
            results_required=wanted,
            results_problem=problem,
            expected_tests=tuple(validation.expected_failing_tests or ()) if env else (),
            baseline_failing=before.failing() if before else (),
        )
        self.environment["scoring"] = {
            "results_mode": mode,
            "results_required": wanted,
            "results_found": results is not None,
            "baseline_results_found": before is not None,
        }
        return verdict(result, outcome, violation, self.agent_overran, evidence)

    def _task_over_disk_limit(self, command: str) -> Failure:
        limit = self.spec.environment.disk_limit_mb
        return Failure(
            Reason.SETUP_FAILED,
            f"{command!r} exceeded the workspace disk limit ({limit} MiB); raise "
            "environment.disk_limit_mb",
            "DISK_LIMIT",
        )

    def _exited_result(self, exc: SandboxExited) -> Result:
        """A sandbox stopped while the engine answers; whose it is: scoring.sandbox_exit."""
        if self.phase == "agent" and self.toolbox is not None:
            where = f"during or after the agent's step {self.toolbox.step}"
        else:
            where = f"in the {self.phase} phase"
        reason, sub, summary = sandbox_exit(self.phase, exc, where)
        return Result(passed=False, failure_reason=reason, sub_reason=sub, summary=summary)

    def _results_env(self) -> tuple[str, dict[str, str]]:
        """A results path and the environment that makes pytest write there (none for
        `results: exit_code`)."""
        if self.spec.validation.results == "exit_code":
            return "", {}
        path = evidence_mod.results_path()
        return path, evidence_mod.results_env(path)

    def _collect_results(
        self, sandbox: Sandbox, path: str
    ) -> tuple[evidence_mod.TestEvidence | None, str | None]:
        if not path:
            return None, None
        try:
            return evidence_mod.collect(sandbox, path), None
        except evidence_mod.EvidenceError as exc:
            return None, str(exc)

    # -- helpers ----------------------------------------------------------------------------------
    def _exec(
        self,
        sandbox: Sandbox,
        phase: str,
        command: str,
        timeout: float,
        log: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        result = sandbox.exec(command, timeout_sec=max(1.0, timeout), env=env)
        name = log or phase
        for stream in ("stdout", "stderr"):
            text = getattr(result, f"full_{stream}") or getattr(result, stream)
            with self.paths.log(f"{name}_{stream}.txt").open("a", encoding="utf-8") as handle:
                if log is None:
                    handle.write(self.cfg.redact(f"$ {command}\n"))
                handle.write(self.cfg.redact(text))
        self.events.emit(
            CommandFinished(
                phase=phase,
                command=self.cfg.redact(command),
                exit_code=result.exit_code,
                duration_ms=result.duration_ms,
                timed_out=result.timed_out,
                oom_killed=result.oom_killed,
                disk_limit_exceeded=result.disk_limit_exceeded,
                stdout_truncated=result.stdout_truncated,
                stderr_truncated=result.stderr_truncated,
                stdout_sha256=sha256(result.stdout),
            )
        )
        return result

    def _tool_event(self, event: Event | str, data: dict[str, Any] | None = None) -> None:
        """The toolbox's events: an event object, or (until tools/ is converted) a type name
        and its fields."""
        if isinstance(event, str):
            self.events.emit(event, actor="tool", **(data or {}))
        else:
            self.events.emit(event, actor="tool")

    def _phase(self, name: str) -> PhaseTimer:
        self.phase = name
        return PhaseTimer(self.events, self.found.timings, name)

    def _timed(self, name: str) -> PhaseTimer:
        return PhaseTimer(self.events, self.found.timings, name, emit=False)

    def _teardown(self) -> None:
        if self.toolbox is not None:  # its snapshot git dir, if scoring did not remove it
            with contextlib.suppress(Exception):
                self.toolbox.close()
        for sandbox in self.open_sandboxes:
            with contextlib.suppress(Exception):  # the label sweep is the backstop
                sandbox.close()
        repo = self.workspace / "repo"
        if self.cfg.keep_workspace and repo.is_dir():
            # An inert copy, never a move: no .git at any depth, no FIFO, no symlink out
            # (core/keep.py). final.patch has the diff.
            report = keep_workspace(repo, self.paths.root / "repo")
            self.environment["kept_workspace"] = report.to_dict()
        for name in self.disk_modes:  # after the keep: it copies from the mount
            with contextlib.suppress(SandboxError):
                self.sandboxes.release(self.workspace / name)
        problems = remove_tree(self.workspace)  # iterative: a 2000-level tree cannot stop us
        if problems:
            self.environment["workspace_cleanup"] = problems[:50]


__all__ = ["Failure", "Trial", "TrialConfig", "attempt_id"]
