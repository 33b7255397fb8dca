"""The agent phase: the edit policy and protected paths, the pristine copy scoring starts from,
the recording toolbox, and the agent's run on its own clock.

The agent's deadline is set when it gets control, `timeout_sec` from then: checkout, setup (or
its env-cache snapshot), baseline and the harness's own preparation here never count against
it, so every attempt of a task gives its agent the same time. The record says what it had
(`limits.agent_time_limit_sec`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import traceback

import pytest_agentbench.core.hidden_tests as hidden_tests
from pytest_agentbench.agents.port import (
    Agent,
    AgentContext,
    AgentError,
    AgentOutcome,
    spend_of,
)
from pytest_agentbench.core.attempt import Attempt
from pytest_agentbench.core.protection import protect
from pytest_agentbench.core.recording import RecordingToolbox
from pytest_agentbench.core.sandbox_ahead import SandboxAhead, opens_ahead, scoring_network
from pytest_agentbench.core.sandbox_programs import SandboxPrograms
from pytest_agentbench.paths.trees import copy_tree
from pytest_agentbench.sandbox.port import Sandbox, SandboxError
from pytest_agentbench.schemas.taxonomy import TASK_BLAMED, Reason
from pytest_agentbench.tools.toolbox import Toolbox, ToolEvent, ToolPolicy


def open_pristine(at: Attempt) -> None:
    """Scoring's starting directory, and its sandbox opening ahead (core/sandbox_ahead.py) where
    the engine shows the host's directories as they change: before the baseline, so that its
    start overlaps the baseline runs. The directory is the env-cache entry's post-setup state
    when there is one (a copy-on-write view: no copy of a large .venv per attempt), else empty
    until `run_agent` copies the workspace into it (the sandbox runs nothing before scoring)."""
    if at.cache_hold is not None:
        at.environment["env_cache"]["pristine"] = at.provision_from("pristine", at.cache_hold.repo)
    else:
        at.provision("pristine")
    if opens_ahead(at):
        at.score_ahead = SandboxAhead(at, scoring_network(at), "score")


def run_agent(at: Attempt, sandbox: Sandbox, agent: Agent) -> RecordingToolbox:
    """Hand the agent its context and tools; whatever it does, an outcome comes back in
    `at.found.outcome` (an agent's exception becomes AGENT_GAVE_UP, an AgentError its reason);
    only a sandbox that went away propagates."""
    spec = at.spec
    policy = _policy(at, sandbox)
    if "pristine" not in at.disk_modes:
        open_pristine(at)
    if at.cache_hold is None:  # scoring starts from the workspace as the agent gets it
        copy_tree(at.workspace / "repo", at.workspace / "pristine")
    inner = Toolbox(sandbox, policy, on_event=functools.partial(_tool_event, at))
    # Its first snapshot is harness work: the agent's clock starts after it.
    toolbox = at.toolbox = RecordingToolbox(
        inner, sandbox, at.paths, at.events, at.cfg.redact, deadline=math.inf,
        snapshots=at.snapshots,
    )
    output = at.baseline_output
    assert output is not None  # the baseline ran
    limit = spec.environment.timeout_sec
    toolbox.deadline = deadline = time.monotonic() + limit
    at.found.agent_time_limit_sec = limit
    ctx = AgentContext(
        task=spec,
        task_dir=at.task.task_dir,
        toolbox=toolbox,
        events=at.events,
        failing_output=(hidden_tests.FAILING_OUTPUT_NOTE if spec.validation.hidden_tests
                        else output.stdout[-20000:] + output.stderr[-4000:]),
        failing_command=spec.validation.failing_command,
        deadline=deadline,
        max_steps=spec.agent.max_steps,
        params=dict(at.cfg.shared.agent_params),
        artifacts_dir=at.paths.root / "agent",
        gateway_dir=at.gateway_dir,
        programs=SandboxPrograms(at, sandbox) if at.gateway_dir is not None else None,
    )
    try:
        at.found.outcome = agent.run(ctx)
    except AgentError as exc:  # infrastructure (LLM_ERROR, ...): keep what was spent
        at.found.outcome = AgentOutcome(
            "error",
            exc.reason,
            exc.sub_reason,
            str(exc),
            model=exc.model,
            usage=exc.usage,
        )
    except SandboxError as exc:  # the record (SANDBOX_ERROR) keeps what the model calls cost
        usage, model = spend_of(exc)
        at.found.outcome = AgentOutcome("error", summary=f"sandbox failed: {exc}", model=model,
                                        usage=usage)
        raise
    except Exception as exc:
        at.paths.log("agent_error.txt").write_text(at.cfg.redact(traceback.format_exc()), "utf-8")
        usage, model = spend_of(exc)
        at.found.outcome = AgentOutcome(
            "error",
            Reason.AGENT_GAVE_UP,
            "AGENT_EXCEPTION",
            f"agent raised {type(exc).__name__}: {exc}",
            model=model,
            usage=usage,
        )
    at.found.outcome = _own_blame(agent, at.found.outcome)
    at.agent_overran = time.monotonic() > deadline
    at.found.agent = toolbox.stats(at.found.outcome)  # refined with the final diff in scoring
    return toolbox


# The one agent whose failure may blame the task: the built-in reference agent, whose missing
# or stale oracle.patch is the task's fault (agents/builtin.py; named, not imported: the
# pipeline knows agents only through their port).
_REFERENCE_AGENT = ("pytest_agentbench.agents.builtin", "OracleAgent")


def _own_blame(agent: Agent, outcome: AgentOutcome) -> AgentOutcome:
    """An agent's outcome may not put its failure on the task (fail closed): a task-blamed
    reason from any agent but the reference one counts against that agent."""
    if outcome.reason is None or outcome.reason not in TASK_BLAMED:
        return outcome
    if (type(agent).__module__, type(agent).__qualname__) == _REFERENCE_AGENT:
        return outcome
    return dataclasses.replace(
        outcome, reason=Reason.AGENT_GAVE_UP, sub_reason="AGENT_BLAMED_TASK",
        summary=f"the agent blamed the task ({outcome.reason}): {outcome.summary}")


def _policy(at: Attempt, sandbox: Sandbox) -> ToolPolicy:
    agent_spec = at.spec.agent
    readonly_globs, readonly_paths = _protection(at, sandbox)
    return ToolPolicy(
        editable_globs=agent_spec.editable_globs,
        readonly_globs=readonly_globs,
        readonly_paths=readonly_paths,
        allow_file_write=agent_spec.allow_file_write,
        max_changed_files=agent_spec.max_changed_files,
        max_lines_changed=agent_spec.max_lines_changed,
        forbidden_commands=list(agent_spec.forbidden_commands),
        tool_timeout_sec=at.spec.environment.tool_timeout_sec,
    )


def _protection(at: Attempt, sandbox: Sandbox) -> tuple[list[str], frozenset[str]]:
    """Read-only globs and paths: the task's, plus its test infrastructure unless it opts
    out (core/protection.py)."""
    globs, paths = list(at.spec.agent.readonly_globs), frozenset[str]()
    if at.spec.agent.protect_test_infra:
        validation = at.spec.validation
        found = protect([validation.failing_command, validation.passing_command], sandbox.files)
        globs += [g for g in found.globs if g not in globs]
        hidden = hidden_tests.load(at)  # its files win at scoring: an edit there is discarded
        paths = found.paths - set(hidden.paths) if hidden else found.paths
    at.environment["readonly"] = {
        "globs": globs, "paths": sorted(paths)[:500], "path_count": len(paths)
    }
    return globs, paths


def _tool_event(at: Attempt, event: ToolEvent) -> None:
    at.events.emit(event, actor="tool")
