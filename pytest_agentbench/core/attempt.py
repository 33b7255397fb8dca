"""What the phases of one attempt share: its task, config, ids, paths, event sink and findings,
the sandboxes it opened, and the helpers that open a sandbox or run a harness command and record
it (logs, `command_finished`, the environment report). The phases themselves live in
before_agent.py, agent_phase.py and score_phase.py; pipeline.py runs them in order.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import pytest_agentbench.core.evidence as evidence_mod
from pytest_agentbench.agents.port import ProgramNeeds
from pytest_agentbench.core.attempt_config import AttemptConfig, attempt_id, sandbox_spec
from pytest_agentbench.core.attempt_record import AttemptFindings
from pytest_agentbench.core.envcache import CacheHold, Claim
from pytest_agentbench.core.event_sink import EventSink
from pytest_agentbench.core.phase_timer import PhaseTimer
from pytest_agentbench.core.program_install import (
    DONE_FILE,
    PROGRAM_TARGET,
    ProgramInstallError,
    ensure_installed,
)
from pytest_agentbench.core.recording import RecordingToolbox
from pytest_agentbench.core.rundir import AttemptPaths
from pytest_agentbench.core.snapshot_fold import split_fold
from pytest_agentbench.sandbox.port import (
    EpilogueRunning,
    ExecResult,
    ExtraMount,
    Sandbox,
    SandboxFactory,
)
from pytest_agentbench.schemas.events import CommandFinished
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.text.signatures import sha256

if TYPE_CHECKING:
    from pytest_agentbench.core.gitops import Snapshotter
    from pytest_agentbench.tasks.loader import LoadedTask


class Failure(Exception):
    """A phase's verdict on the attempt: its one primary reason code."""

    def __init__(self, reason: Reason, summary: str, sub_reason: str | None = None) -> None:
        super().__init__(summary)
        self.reason, self.summary, self.sub_reason = reason, summary, sub_reason


class PrologueDeferred(Exception):
    """`run_command`'s prologue failed, or its block is missing: nothing was logged, and the
    command did not run unless the exec's output was lost (`result.output_lost`)."""

    def __init__(self, result: ExecResult) -> None:
        super().__init__("the prologue deferred")
        self.result = result


GATEWAY_TARGET = "/run/agentbench/gateway"  # a command agent's gateway socket, in its sandbox


class SandboxOpening(Protocol):
    """A sandbox being opened ahead of its use (core/sandbox_ahead.py SandboxAhead)."""

    def take(self) -> Sandbox: ...
    def discard(self) -> None: ...


class Attempt:
    """The state of one attempt, filled in as its phases run."""

    def __init__(self, task: LoadedTask, cfg: AttemptConfig, sandboxes: SandboxFactory,
                 needs: ProgramNeeds | None = None) -> None:
        self.task, self.spec, self.cfg, self.sandboxes = task, task.spec, cfg, sandboxes
        # an agent that runs its own program (agents/command.py): the agent's sandbox sees a
        # directory for its model gateway's socket (a short path: a socket's is at most 107
        # bytes) and the program's installation, read-only
        self.needs = needs
        self.gateway_dir: Path | None = None
        if needs is not None:
            self.gateway_dir = Path(tempfile.mkdtemp(prefix="agentbench-gw-"))
            self.gateway_dir.chmod(0o755)
        self.attempt_id = attempt_id(
            cfg.shared.run_id, self.spec.id, cfg.shared.variant, cfg.attempt_index,
            cfg.shared.session,
        )
        self.paths = AttemptPaths(cfg.shared.run_dir, self.spec.id, cfg.attempt_label)
        self.events = EventSink(
            cfg.shared.events_path, cfg.shared.run_id, self.spec.id, self.attempt_id, cfg.redact_obj
        )
        self.found = AttemptFindings(commit=self.spec.repo.commit)
        self.environment: dict[str, Any] = {}  # meta/environment.json
        self.workspace = cfg.shared.work_root / self.attempt_id.replace(":", "_")
        self.env_dir = self.workspace / "env"
        self.open_sandboxes: list[Sandbox] = []
        self.disk_modes: dict[str, str] = {}  # workspace dir -> "filesystem" | "watched" | "none"
        self.phase = "prepare"
        self.baseline_output: ExecResult | None = None  # the first baseline run
        self.baseline_results: evidence_mod.JunitResults | None = None
        self.toolbox: RecordingToolbox | None = None
        self.snapshots: Snapshotter | None = None  # the agent's, started by the baseline runs
        self.score_ahead: SandboxOpening | None = None  # scoring's sandbox, opening from the agent
        # phase's start (core/sandbox_ahead.py); scoring takes it, the attempt's end discards it
        self.agent_overran = False
        self.cache_key: str | None = None  # the env-cache key, when setup is cacheable
        self.cache_hold: CacheHold | None = None  # the entry this attempt uses, held
        self.cache_claim: Claim | None = None  # the right to build the entry, or the wait's end

    # -- phases and timing ----------------------------------------------------------------------
    def phase_timer(self, name: str) -> PhaseTimer:
        self.phase = name
        return PhaseTimer(self.events, self.found.timings, name)

    def timed(self, name: str) -> PhaseTimer:
        return PhaseTimer(self.events, self.found.timings, name, emit=False)

    # -- workspace and sandboxes ----------------------------------------------------------------
    def provision(self, name: str) -> None:
        """A workspace directory bounded by the task's disk limit before anything lands in it."""
        limit = self.spec.environment.disk_limit_mb
        self.disk_modes[name] = self.sandboxes.provision(self.workspace / name, limit)
        self.environment["disk_limit"] = {"mb": limit, **self.disk_modes}

    def provision_from(self, name: str, base: Path) -> str:
        """A workspace directory that starts as a view (or copy) of `base`; returns how."""
        limit = self.spec.environment.disk_limit_mb if name != "env" else None
        self.disk_modes[name], how = self.sandboxes.provision_from(
            self.workspace / name, limit, base
        )
        self.environment["disk_limit"] = {"mb": limit, **self.disk_modes}
        return how

    def release_cache(self) -> None:
        """Let go of the env-cache entry and of the right to build one (teardown, after the
        views of the entry were released)."""
        if self.cache_hold is not None:
            self.cache_hold.close()
        if self.cache_claim is not None:
            self.cache_claim.release()
        self.cache_hold = self.cache_claim = None

    def open_sandbox(self, network: bool, phase: str) -> Sandbox:
        with self.timed("sandbox_start"):
            sandbox = self.sandboxes.open(
                sandbox_spec(self.cfg, self.spec, self.workspace, network, phase, self.env_dir,
                             extra_mounts=self._agent_mounts() if phase == "agent" else ())
            )
        self.open_sandboxes.append(sandbox)
        self.environment.setdefault("sandboxes", []).append(
            {"phase": phase, "network": network, "facts": sandbox.facts()}
        )
        return sandbox

    def _agent_mounts(self) -> tuple[ExtraMount, ...]:
        """A command agent's gateway directory and program, installed first when it has not
        been (core/program_install.py; before the agent's clock starts)."""
        if self.needs is None or self.gateway_dir is None:
            return ()
        if self.needs.install is not None and self.needs.program_dir is None:
            base = sandbox_spec(self.cfg, self.spec, self.workspace, True, "setup",
                                self.workspace / "program-install-env")
            with self.timed("agent_install"):
                try:
                    self.needs, fresh = ensure_installed(self.needs, self.sandboxes, base)
                except ProgramInstallError as exc:
                    raise Failure(Reason.SANDBOX_ERROR, str(exc), "AGENT_INSTALL") from None
            self.environment["agent_program"] = {"dir": str(self.needs.program_dir),
                                                 "installed_now": fresh}
        mounts: tuple[ExtraMount, ...] = (
            ExtraMount(self.gateway_dir, GATEWAY_TARGET, "AGENTBENCH_GATEWAY_DIR"),)
        if self.needs.program_dir is not None:
            mounts += (ExtraMount(self.needs.program_dir, PROGRAM_TARGET,
                                  "AGENTBENCH_PROGRAM_DIR", self._install_key()),)
        return mounts

    def _install_key(self) -> str | None:
        """What names an installed program's content (its install key and when the install
        finished): an engine that copies it keeps one copy; a program directory of the user's
        own may change between runs, so it has none."""
        if self.needs is None or self.needs.install is None or self.needs.program_dir is None:
            return None
        done = self.needs.program_dir / DONE_FILE
        try:
            return f"{self.needs.program_dir.name}:{done.stat().st_mtime_ns}"
        except OSError:
            return None

    # -- harness commands -----------------------------------------------------------------------
    def run_command(
        self,
        sandbox: Sandbox,
        phase: str,
        command: str,
        timeout: float,
        log: str | None = None,
        env: dict[str, str] | None = None,
        results_path: str = "",
        epilogue: str = "",
        prologue: str = "",
    ) -> ExecResult:
        """Run a harness command (setup, capture, baseline, scoring); its output goes to
        logs/<log or phase>_{stdout,stderr}.txt (redacted) and a `command_finished` event.
        `results_path`: the results file it writes, read back in the same exec where the sandbox
        can (ExecResult.file_read; `collect_results` reads it otherwise). `epilogue`: a harness
        script run after it in the same exec where the sandbox can (ExecResult.epilogue_output;
        the caller runs it otherwise). `prologue`: a harness script run before it in the same
        exec, for a sandbox that `runs_prologues` (the caller asks only such a one); when it
        fails, PrologueDeferred (the command did not run)."""
        extra: dict[str, Any] = {}  # only what this sandbox takes (port.EpilogueRunning)
        if prologue:  # inline: bounded by the exec's deadline, as a command of its own would be
            extra.update(prologue=prologue, inline_scripts=True)
        if results_path and getattr(sandbox, "collects_files", False):
            extra["collect_file"] = results_path
        if epilogue and getattr(sandbox, "runs_epilogues", False):
            extra["epilogue"] = epilogue
        if extra:
            result = cast(EpilogueRunning, sandbox).exec(
                command, timeout_sec=max(1.0, timeout), env=env, **extra)
        else:
            result = sandbox.exec(command, timeout_sec=max(1.0, timeout), env=env)
        if prologue:
            folded = split_fold(result)
            if folded.result is None or folded.block is None:
                raise PrologueDeferred(result)
            result = folded.result
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

    def results_env(self) -> tuple[str, dict[str, str]]:
        """A results path and the environment that makes pytest write there (none for
        `results: exit_code`)."""
        if self.spec.validation.results == "exit_code":
            return "", {}
        path = evidence_mod.results_path()
        return path, evidence_mod.results_env(path)

    def collect_results(
        self, sandbox: Sandbox, path: str, ran: ExecResult | None = None
    ) -> tuple[evidence_mod.JunitResults | None, str | None]:
        """pytest's results read back from `path` (core/evidence.py), or why they could not be;
        from `ran`, the command that wrote them, when it read them back (`run_command`)."""
        if not path:
            return None, None
        try:
            if ran is not None and ran.file_read:
                return evidence_mod.from_bytes(ran.file_content), None
            return evidence_mod.collect(sandbox, path), None
        except evidence_mod.EvidenceError as exc:
            return None, str(exc)

    def over_disk_limit(self, command: str) -> Failure:
        """A setup or baseline command that filled the workspace: the task's failure."""
        limit = self.spec.environment.disk_limit_mb
        return Failure(
            Reason.SETUP_FAILED,
            f"{command!r} exceeded the workspace disk limit ({limit} MiB); raise "
            "environment.disk_limit_mb",
            "DISK_LIMIT",
        )
