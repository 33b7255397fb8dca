"""Scoring: the agent's diff applied to the pre-agent copy of the workspace and the passing
command run there, in a new sandbox; the verdict from its exit status and pytest's results
(core/scoring.py, core/evidence.py). With `--agentbench-regrade N`, the same N more times, each
in a fresh sandbox under another hash seed (core/regrade.py)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest_agentbench.core.evidence as evidence_mod
import pytest_agentbench.core.hidden_tests as hidden_tests
import pytest_agentbench.core.regrade as regrade_mod
from pytest_agentbench.agents.port import AgentOutcome
from pytest_agentbench.core.attempt import Attempt, Failure, PrologueDeferred, SandboxOpening
from pytest_agentbench.core.gitops import SnapshotError, apply_command
from pytest_agentbench.core.protection import pytest_config_change
from pytest_agentbench.core.recording import RecordingToolbox
from pytest_agentbench.core.sandbox_ahead import (
    ClosingBehind,
    SandboxAhead,
    opens_ahead,
    scoring_network,
)
from pytest_agentbench.core.scoring import ScoringEvidence, verdict
from pytest_agentbench.paths.host_files import HostFiles
from pytest_agentbench.sandbox.port import ExecResult, Sandbox, SandboxError
from pytest_agentbench.schemas.records import Result
from pytest_agentbench.schemas.taxonomy import TASK_BLAMED, Reason


def score(at: Attempt, agent_sandbox: Sandbox, toolbox: RecordingToolbox) -> Result:
    """The diff is the solution: it is applied to the pre-agent copy of the workspace and
    tested in a new sandbox, so nothing else the agent left behind (processes, /tmp, HOME,
    files it hid from git) can influence the verdict."""
    outcome = at.found.outcome or AgentOutcome("error")
    if outcome.reason in (Reason.LLM_ERROR, Reason.SANDBOX_ERROR) or \
            outcome.reason in TASK_BLAMED:  # the reference agent found the task broken
        raise Failure(outcome.reason, outcome.summary or str(outcome.reason), outcome.sub_reason)
    network = scoring_network(at)
    # scoring's sandbox started with the agent phase (core/sandbox_ahead.py); this one's now
    ahead: SandboxOpening | None
    ahead, at.score_ahead = at.score_ahead, None
    if ahead is None and opens_ahead(at):
        ahead = SandboxAhead(at, network, "score")
    closing: list[ClosingBehind] = []  # the agent's sandbox, removed while scoring goes on
    try:
        result = _score(at, agent_sandbox, toolbox, outcome, network, ahead, closing)
        for behind in closing:
            behind.wait()  # a failed removal fails the attempt, as when it ran in line
        return result
    finally:
        if ahead is not None:
            ahead.discard()
        for behind in closing:  # gone before the attempt's end unmounts or removes anything
            with contextlib.suppress(BaseException):
                behind.wait()


def _score(at: Attempt, agent_sandbox: Sandbox, toolbox: RecordingToolbox, outcome: AgentOutcome,
           network: bool, ahead: SandboxOpening | None, closing: list[ClosingBehind]) -> Result:
    spec = at.spec
    try:
        violation = toolbox.final_diff_violation()
    except SnapshotError as exc:
        raise Failure(
            Reason.TOOL_ERROR, f"workspace unreadable: {exc}", "WORKSPACE_UNREADABLE"
        ) from exc
    if violation is None and spec.agent.protect_test_infra:
        pristine = HostFiles(at.workspace / "pristine")
        violation = pytest_config_change(pristine, agent_sandbox.files, toolbox.changed_files,
                                         toolbox.final_patch)  # the patch is what is scored
    at.found.agent = toolbox.stats(outcome)
    if ahead is not None:  # nothing runs in it any more: its removal overlaps scoring
        closing.append(ClosingBehind(agent_sandbox))
    else:
        agent_sandbox.close()
    # started on the pre-agent copy: what is written into it from here on, it sees as written
    sandbox = ahead.take() if ahead is not None else None
    patch, overrode = toolbox.final_patch, None
    hidden = hidden_tests.load(at)
    if hidden is not None:  # they win over the agent's edits to their files
        patch, overrode = hidden_tests.discard_agent_edits(patch, hidden)
        hidden_tests.place(hidden, at, "pristine")
        at.environment["hidden_tests"] = {"paths": list(hidden.paths), "overrode": overrode}
    if patch:  # before the sandbox opens, if it is not open: a remote engine gets a copy then
        patch_file = at.workspace / "pristine" / ".git" / "agentbench-final.patch"
        patch_file.write_text(patch, "utf-8")
    if sandbox is not None:  # opened ahead: its open gave the copy to the sandbox user before
        _give_to_sandbox_user(at, (".git/agentbench-final.patch", hidden_tests.HIDDEN_PATCH))
    # what the regrades start from, copied now (scoring's sandbox changes the pre-agent copy)
    # only for an attempt the rules do not already decide, and removed again on every path
    regraded = at.cfg.shared.regrade > 0 and violation is None
    base = regrade_mod.keep_base(at) if regraded else None
    try:
        if sandbox is None:
            sandbox = at.open_sandbox(network, phase="score")
        result = _grade(at, sandbox, outcome, violation, patch, base)
    finally:
        if base is not None:
            regrade_mod.drop_base(base)
    return result if overrode is None else result.model_copy(
        update={"hidden_tests_overrode": overrode})


def _give_to_sandbox_user(at: Attempt, names: tuple[str, ...]) -> None:
    """The files `names` written into the pre-agent copy after its sandbox opened, given to the
    owner that open gave the copy (a root harness's own files, under a umask such as 077, are
    unreadable to the sandbox user: the diff did not apply)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return  # the open gave nothing away (sandbox/docker/factory.py _prepare_dirs)
    pristine = at.workspace / "pristine"
    owner = os.stat(pristine / ".git", follow_symlinks=False)
    for name in names:
        path = pristine / name
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(path, follow_symlinks=False)
            if (st.st_uid, st.st_gid) != (owner.st_uid, owner.st_gid):
                os.chown(path, owner.st_uid, owner.st_gid, follow_symlinks=False)


def _grade(
    at: Attempt, sandbox: Sandbox, outcome: AgentOutcome, violation: str | None, patch: str,
    base: Path | None,
) -> Result:
    """The grading in `sandbox` (new, nothing run in it yet), then the regrades when `base` is
    given and the passing command decided the verdict."""
    # the diff applied in the passing command's own exec, just before it, where it can be
    folded = (bool(patch) and at.spec.validation.hidden_tests is None
              and getattr(sandbox, "runs_prologues", False))
    if patch and not folded:
        _apply_diff(at, sandbox)
    _apply_hidden_tests(at, sandbox)
    command, result = _run_scored(at, sandbox, outcome, violation, "passing", folded)
    if base is None or not regrade_mod.gradable(command, violation):
        return result

    def once(fresh: Sandbox, log: str, patched: bool) -> tuple[ExecResult, Result]:
        if patched:  # the agent's diff, or the reference's (core/regrade.py)
            reference = log.startswith(regrade_mod.REFERENCE)
            _apply_diff(at, fresh, "the reference solution" if reference else "the agent's diff")
        _apply_hidden_tests(at, fresh)
        return _run_scored(at, fresh, outcome, None, log)

    with at.timed("regrade"):
        return regrade_mod.regrade(at, base, patch, result, once)


def _apply_diff(at: Attempt, sandbox: Sandbox, what: str = "the agent's diff") -> None:
    """The agent's diff (written to the workspace's .git) applied exactly as recorded; `what`
    names it in a failure (a regrade may apply the reference solution instead)."""
    _check_applied(at, sandbox.exec(apply_command(),
                                    timeout_sec=at.spec.environment.tool_timeout_sec), what)


def _check_applied(at: Attempt, applied: ExecResult, what: str = "the agent's diff") -> None:
    """The failure of an exec that applied `what` (nothing when it applied)."""
    if applied.disk_limit_exceeded:
        raise Failure(
            Reason.TESTS_FAILED,
            f"{what} does not fit the workspace disk limit "
            f"({at.spec.environment.disk_limit_mb} MiB)",
            "DISK_LIMIT_EXCEEDED",
        )
    if not applied.ok:
        why = "timed out" if applied.timed_out else applied.stderr.strip()[-200:]
        raise Failure(
            Reason.TOOL_ERROR,
            f"{what} does not apply to the pre-agent workspace: {why}",
            "DIFF_NOT_APPLICABLE",
        )


def _apply_hidden_tests(at: Attempt, sandbox: Sandbox) -> None:
    """The task's hidden tests over the diff applied, when it has them: with the agent's edits
    to their files dropped from that diff, they apply wherever they applied at baseline, unless
    the agent's diff put something in their way (a file where they need a directory)."""
    if at.spec.validation.hidden_tests is not None:
        hidden_tests.apply(at, sandbox, Reason.TESTS_FAILED, "after the diff")


def _run_scored(
    at: Attempt, sandbox: Sandbox, outcome: AgentOutcome, violation: str | None, log: str,
    apply: bool = False,
) -> tuple[ExecResult, Result]:
    """The passing command, its exit status as the sandbox observed it, and pytest's results
    read back from a file the test run was told to write (core/evidence.py). `log` names the
    command's log files (`passing`; `regrade-N` for a regrade). `apply`: the agent's diff is
    applied first, in the same exec (port.EpilogueRunning's prologue); when that fails, the
    command does not run and the diff is applied by itself, which says why."""
    validation = at.spec.validation
    mode, before = validation.results, at.baseline_results
    # auto: required when pytest reported before the agent and the passing command runs it
    wanted = mode == "junit" or (
        mode == "auto"
        and before is not None
        and evidence_mod.runs_pytest(validation.passing_command)
    )
    path, env = at.results_env()

    def passing(prologue: str = "") -> ExecResult:
        return at.run_command(sandbox, "score" if log == "passing" else "regrade",
                              validation.passing_command, at.spec.environment.tool_timeout_sec,
                              log=log, env=env, results_path=path, prologue=prologue)

    try:
        result = passing(apply_command() if apply else "")
    except PrologueDeferred as deferred:
        folded = deferred.result
        if folded.output_lost:  # whether the diff applied and the command ran: unknown
            raise SandboxError("the engine lost the output of scoring's command") from None
        if folded.disk_limit_exceeded or folded.timed_out:  # cut short: maybe half applied
            _check_applied(at, folded)
        # it ran to its end and failed: git checks every hunk before it writes a file, so the
        # copy is as it was; applied alone, it says why
        _apply_diff(at, sandbox)
        result = passing()
    results, problem = at.collect_results(sandbox, path, result)
    evidence = ScoringEvidence(
        results=results,
        results_required=wanted,
        results_problem=problem,
        expected_tests=tuple(validation.expected_failing_tests or ()) if env else (),
        baseline_failing=before.failing() if before else (),
    )
    if log == "passing":
        at.environment["scoring"] = {
            "results_mode": mode,
            "results_required": wanted,
            "results_found": results is not None,
            "baseline_results_found": before is not None,
        }
    return result, verdict(result, outcome, violation, at.agent_overran, evidence)
