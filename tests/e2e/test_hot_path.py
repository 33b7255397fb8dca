"""The attempt's hot path on a real Docker engine (issue 25 item 5): what an oracle attempt on a
task without setup asks of the engine, command by command, so a change that adds an exec or gives up
the scoring sandbox's early start shows here rather than only as a slower benchmark.

- No `git status` when nothing ran in the workspace since the harness checked it out.
- The snapshots start (the ignore rules, the harness git dir) in the first baseline run's exec
  and the base tree is taken in the last one's, after each command (sandbox/docker/policy.py
  EPILOGUE), not in execs of their own.
- pytest's results file is read back by the command that wrote it (sandbox/docker/policy.py
  COLLECT), not by a command of its own.
- The pending step's snapshot and the final one are one exec when the step starts from the base.
- Scoring's sandbox starts before the baseline runs (core/sandbox_ahead.py), long before the
  agent's sandbox is removed (behind scoring, in a thread the attempt waits for); an attempt
  that ends before scoring takes it leaves no container.
- Scoring applies the diff in the passing command's own exec, just before it (the wrapper's
  prologue); a diff that does not apply stops the command and is applied by itself for the
  reason.
"""

from __future__ import annotations

import secrets
import threading
from pathlib import Path
from typing import Any

from pytest_agentbench.agents.builtin import OracleAgent
from pytest_agentbench.agents.port import AgentContext, AgentOutcome
from pytest_agentbench.core.pipeline import AttemptPipeline
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.run.hostenv import SANDBOX_UID
from pytest_agentbench.sandbox.port import ExecResult, Sandbox, SandboxError, SandboxSpec
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.tasks.discovery import discover
from tests.support.attempts import attempt_config

ROOT = Path(__file__).resolve().parents[2]
TASK = "fix-mean-off-by-one"  # no setup commands, no capture commands, no hidden tests


class Log:
    def __init__(self, failing_close: tuple[str, ...] = ()) -> None:
        self.lines: list[str] = []
        self.lock = threading.Lock()
        self.failing_close = failing_close  # phases whose sandbox's close raises (after it)

    def add(self, line: str) -> None:
        with self.lock:
            self.lines.append(line)


class CountingSandbox:
    """The engine's sandbox, its commands and its removal written to `log`."""

    def __init__(self, inner: Sandbox, phase: str, log: Log) -> None:
        self.inner, self.phase, self.log = inner, phase, log

    def exec(self, command: str, **kwargs: Any) -> ExecResult:
        applies = (kwargs.get("prologue") or "").startswith("PATCH=")
        self.log.add(f"exec {self.phase} {'[apply] ' if applies else ''}"
                     f"{command.splitlines()[0][:60]}")
        return self.inner.exec(command, **kwargs)

    def close(self) -> None:
        self.log.add(f"close {self.phase} {threading.current_thread().name}")
        self.inner.close()
        self.log.add(f"closed {self.phase}")
        if self.phase in self.log.failing_close:
            raise SandboxError(f"the engine would not remove the {self.phase} sandbox")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class CountingFactory:
    def __init__(self, inner: Any, log: Log) -> None:
        self.inner, self.log = inner, log

    def open(self, spec: SandboxSpec) -> CountingSandbox:
        phase = spec.labels.get("agentbench.phase", "?")
        self.log.add(f"open {phase}")
        return CountingSandbox(self.inner.open(spec), phase, self.log)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def run_attempt(factory: Any, tmp_path: Path, agent: Any, run_id: str = "hot",
                failing_close: tuple[str, ...] = ()) -> tuple[Any, list[str]]:
    task = {t.id: t for t in discover(ROOT / "taskpacks", ["custom-dev"]).tasks}[TASK]
    assert not task.spec.setup.commands and not task.spec.setup.capture
    log = Log(failing_close)
    cfg = attempt_config(tmp_path, run_id, image=factory_image(), owner_uid=SANDBOX_UID)
    record = AttemptPipeline(task, cfg, CountingFactory(factory, log),
                             MirrorCache(tmp_path / "git"), agent).run()
    return record, log.lines


def factory_image() -> str:
    from pytest_agentbench.sandbox.docker.image import ensure_image
    return ensure_image(quiet=True).name


def kinds(lines: list[str]) -> list[str]:
    """Each line's verb and phase, and for a command what it is (by its first words)."""
    out = []
    for line in lines:
        verb, phase, *rest = line.split(" ", 2)
        text = rest[0] if rest else ""
        applied, text = text.startswith("[apply] "), text.removeprefix("[apply] ")
        what = ("junit" if text.startswith("test -f /tmp/agentbench-results") else
                "git-status" if " status " in text or text.startswith("git ") else
                "snapshot" if text.startswith(("set -o pipefail", "GD=")) else
                "apply" if text.startswith("PATCH=") else "command" if verb == "exec" else "")
        out.append(f"{verb} {phase} {'apply+' if applied else ''}{what}".rstrip())
    return out


def test_an_oracle_attempt_asks_the_engine_for_its_commands_and_little_more(
        docker_sandboxes: Any, tmp_path: Path) -> None:
    record, lines = run_attempt(docker_sandboxes, tmp_path, OracleAgent())
    assert record.result.passed, record.result
    steps = kinds(lines)
    assert steps[0] == "open agent"
    agent_execs = [s for s in steps if s.startswith("exec agent")]
    assert agent_execs == [
        # the baseline twice (results read back); after the first the snapshots start, after
        # the second the base tree is taken, each in the run's own exec
        "exec agent command", "exec agent command",
        "exec agent snapshot",  # the oracle's step and the final diff, in one
    ], lines
    # the diff applied in the passing command's exec
    assert [s for s in steps if s.startswith("exec score")] == ["exec score apply+command"], lines
    # scoring's sandbox was asked for before the baseline ran (its pristine directory made), so
    # its start overlaps the baseline: at the latest (its thread may log after the first run is
    # asked for) before the second run, and so before the agent's removal
    runs = [i for i, s in enumerate(steps) if s == "exec agent command"]
    assert steps.index("open score") < runs[1], lines
    assert steps.index("open score") < steps.index("close agent")
    # the agent's sandbox is removed in a thread of its own while scoring goes on, and the
    # attempt waits for that removal before it ends
    closes = [line for line in lines if line.startswith("close agent")]
    assert closes[0] == "close agent agentbench-close-sandbox", lines  # later: no-op closes
    assert "closed agent" in lines, lines
    step_patch = tmp_path / "run" / record.artifact_paths["task_dir"] / "diffs" / "step_0001.patch"
    final_patch = step_patch.with_name("final.patch")
    assert step_patch.read_text("utf-8") == final_patch.read_text("utf-8") != ""


class NestedRepoAgent:
    """Makes a git repository inside the workspace, which no snapshot records: the final diff
    fails, so the attempt ends before scoring takes its sandbox."""

    name = "nested-repo"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        ctx.toolbox.call("run", {"command": "git init -q nested && echo x > nested/f"})
        return AgentOutcome("finish", steps=1)


def test_a_scoring_sandbox_opened_ahead_and_never_used_is_removed(
        docker_sandboxes: Any, tmp_path: Path) -> None:
    import docker

    run_id = f"hot-{secrets.token_hex(4)}"  # its containers alone, whatever else runs
    record, lines = run_attempt(docker_sandboxes, tmp_path, NestedRepoAgent(), run_id)
    assert record.result.failure_reason == Reason.TOOL_ERROR, record.result
    assert record.result.sub_reason == "WORKSPACE_UNREADABLE"
    assert "open score" in kinds(lines) and "close score" in kinds(lines), lines
    left = docker.from_env().containers.list(
        all=True, filters={"label": [f"agentbench.run_id={run_id}"]})
    assert left == [], [(c.labels, c.status) for c in left]


def test_a_failed_removal_of_the_agents_sandbox_behind_scoring_still_fails_the_attempt(
        docker_sandboxes: Any, tmp_path: Path) -> None:
    """Removed in a thread, the agent's sandbox still counts: the removal's error is the
    attempt's, as when the removal ran before scoring."""
    record, lines = run_attempt(docker_sandboxes, tmp_path, OracleAgent(),
                                f"hot-{secrets.token_hex(4)}", failing_close=("agent",))
    assert "close agent agentbench-close-sandbox" in lines, lines
    assert not record.result.passed
    assert record.result.failure_reason == Reason.SANDBOX_ERROR, record.result
    assert "would not remove the agent sandbox" in (record.result.summary or ""), record.result


class SpoilingAgent:
    """The oracle's edit, and the same line changed otherwise in the pre-agent copy scoring
    starts from (a stand-in for whatever could make them differ): the diff cannot apply."""

    name = "spoiling"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        target = "minilib/mathx.py"
        text = ctx.toolbox.call("read_file", {"path": target}).stdout
        ctx.toolbox.call("write_file", {"path": target, "content": text.replace("- 1", "+ 0")})
        pristine = ctx.toolbox.sandbox.spec.workspace.parent / "pristine" / target
        pristine.write_text(text.replace("- 1", "- 2"))
        return AgentOutcome("finish", steps=2)


def test_a_diff_that_does_not_apply_stops_the_command_and_says_why(
        docker_sandboxes: Any, tmp_path: Path) -> None:
    record, lines = run_attempt(docker_sandboxes, tmp_path, SpoilingAgent(),
                                f"hot-{secrets.token_hex(4)}")
    assert record.result.failure_reason == Reason.TOOL_ERROR, record.result
    assert record.result.sub_reason == "DIFF_NOT_APPLICABLE"
    assert "patch does not apply" in (record.result.summary or ""), record.result
    # the folded exec ran no command; the diff was then applied alone, for git's message
    assert [s for s in kinds(lines) if s.startswith("exec score")] == [
        "exec score apply+command", "exec score apply"], lines
    logs = tmp_path / "run" / record.artifact_paths["task_dir"] / "logs"
    assert not (logs / "passing_stdout.txt").exists()
