"""command: any agent program, run inside the sandbox behind the attempt's model gateway.
A variant names the program instead of a Python agent:

    name: my-agent
    agent: command
    params:
      command: python3 $AGENTBENCH_PROGRAM_DIR/agent.py     # run in the workspace, by sh -c
      program_dir: my_agent/    # host directory, read-only at $AGENTBENCH_PROGRAM_DIR, or:
      # install: python3 -m venv $AGENTBENCH_PROGRAM_DIR/venv && ...  # once per image, with
      #   the network, before any agent's clock; cached (core/program_install.py)
      env: {MY_AGENT_MODE: headless}
      trajectory: /tmp/agent-trajectory.json   # collected into the attempt's agent/ folder
      port: 8089                # the sandbox's loopback port the model is reached on
      # cassette: runs/<run-id>  # replay: the model calls are answered from the cassettes
      #   this run recorded (agent/cassette.jsonl), with no model and no key
    model: {preset: openai, name: gpt-4o-mini}   # the evaluated model, as for llm_v0
    budgets: {max_steps: 30, max_cost_usd: 0.5}  # checked by the gateway before each call

The program gets, in its environment: the task statement (`AGENTBENCH_TASK`, the first message
llm_v0 gets: the description, the edit policy, the failing command and its output), the
failing command (`AGENTBENCH_FAILING_COMMAND`), the evaluated model's name (`AGENTBENCH_MODEL`),
`OPENAI_BASE_URL` / `OPENAI_API_BASE` (`http://127.0.0.1:PORT/v1`), `ANTHROPIC_BASE_URL`, and
the gateway's per-attempt token as `OPENAI_API_KEY` and `ANTHROPIC_API_KEY`. The model's real
key stays on the host, in the gateway; the sandbox keeps `--network none`: a relay listens on
the sandbox's loopback and forwards to the gateway's Unix socket, which answers model calls of
this attempt only: the socket mounted read-only (gateway/relay.py), or, on an engine that cannot
see this host's files, through an exec the harness holds open (gateway/tunnel.py;
core/sandbox_programs.py).

The program works on the workspace with its own tools; the harness's snapshots and scoring see
its changes as any agent's. It ends by exiting; the task's time limit ends it otherwise
(TIMEOUT). A budget the gateway refused, or a model failure, ends the attempt with llm_v0's
reasons; the calls are `llm_request`/`llm_response` events and the record's `usage`, as
llm_v0's. A program that exits non-zero is recorded (its output in
logs/agent_program_*.txt); scoring decides the result.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_agentbench.agents.llm_config import LLMAgentConfig
from pytest_agentbench.agents.port import (
    AgentContext,
    AgentError,
    AgentOutcome,
    GatewayLink,
    ProgramNeeds,
)
from pytest_agentbench.agents.statement import task_statement
from pytest_agentbench.gateway import CASSETTE_NAME, CassetteError, ModelGateway
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.text.redaction import Redactor

SOCKET_NAME = "gateway.sock"
MAX_TRAJECTORY_BYTES = 64 << 20


class CommandParams(BaseModel):
    """A command agent's `params:` (unknown keys are refused: a typo must not go unnoticed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str = Field(min_length=1)
    program_dir: str | None = None
    install: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    trajectory: str | None = None
    port: int = Field(default=8089, ge=1024, le=65535)
    failing_output_chars: int = Field(default=8000, ge=0)
    cassette: str | None = None  # a run directory or a cassette file to replay

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> CommandParams:
        try:
            return cls.model_validate(dict(raw))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "params"
            raise ValueError(f"params.{where}: {first['msg']}") from None


class CommandAgent:
    """Runs `params.command` in the sandbox behind a ModelGateway (see the module docstring)."""

    name = "command"
    uses_llm_config = True  # agents.variants resolves the model, budgets and key for it
    takes_variant_params = True  # and hands it the variant's params and folder

    def __init__(self, config: LLMAgentConfig, *, params: Mapping[str, Any],
                 base_dir: Path | None = None, redactor: Redactor | None = None) -> None:
        self.config, self.redactor = config, redactor
        self.params = CommandParams.parse(params)
        program_dir = None
        if self.params.program_dir is not None:
            program_dir = Path(self.params.program_dir).expanduser()
            if not program_dir.is_absolute() and base_dir is not None:
                program_dir = base_dir / program_dir
            program_dir = program_dir.resolve()
        self.needs = ProgramNeeds(program_dir=program_dir, install=self.params.install)
        self.cassette = None
        if self.params.cassette is not None:
            cassette = Path(self.params.cassette).expanduser()
            if not cassette.is_absolute() and base_dir is not None:
                cassette = base_dir / cassette
            self.cassette = cassette.resolve()

    @staticmethod
    def check_params(params: Mapping[str, Any]) -> None:
        parsed = CommandParams.parse(params)
        if parsed.program_dir is not None and "://" in parsed.program_dir:
            raise ValueError("params.program_dir: a directory on this machine, not a URL")
        if parsed.program_dir is not None and parsed.install is not None:
            raise ValueError("params.install: give program_dir (a directory of yours) or install "
                             "(commands that fill one), not both")

    def run(self, ctx: AgentContext) -> AgentOutcome:
        if ctx.gateway_dir is None or ctx.programs is None:
            raise AgentError(Reason.SANDBOX_ERROR, "the sandbox was made without the command "
                             "agent's gateway directory", sub_reason="NO_GATEWAY")
        socket_path = ctx.gateway_dir / SOCKET_NAME
        try:
            gateway = ModelGateway.for_model(
                self.config.model, self.config.budget, ctx.deadline, ctx.events,
                redactor=self.redactor, artifacts_dir=ctx.artifacts_dir,
                prompt_version=None, replay=self._cassette(ctx))
        except CassetteError as exc:
            raise AgentError(Reason.LLM_ERROR, str(exc), sub_reason="CASSETTE_MISSING") from None
        with gateway.start(unix_socket=socket_path):
            result = ctx.programs.run(self.params.command, env=self._env(ctx, gateway.token),
                                      timeout_sec=max(1.0, ctx.remaining()),
                                      gateway=GatewayLink(self.params.port, socket_path))
        self._collect_trajectory(ctx)
        outcome = AgentOutcome(
            "done", summary=f"{self.params.command.split()[0]} exited {result.exit_code}",
            model=gateway.model, usage=gateway.usage, steps=gateway.usage.llm_calls)
        stop = gateway.stop
        if stop is not None:
            outcome.finished_by, outcome.reason = "budget", stop.reason
            outcome.sub_reason, outcome.summary = stop.sub_reason, stop.summary
        elif result.timed_out or time.monotonic() > ctx.deadline:
            outcome.finished_by, outcome.reason = "timeout", Reason.TIMEOUT
            outcome.sub_reason = "TASK_BUDGET"
            outcome.summary = f"the agent program ran out of time ({result.duration_ms} ms)"
        return outcome

    def _cassette(self, ctx: AgentContext) -> Path | None:
        """The cassette this attempt replays: the file given, or in the run directory given the
        one at this attempt's place (tasks/<id>[/<attempt>]/agent/), else the task's first."""
        if self.cassette is None or self.cassette.is_file():
            return self.cassette
        task = ctx.task.id
        places = [Path("tasks") / task / "agent" / CASSETTE_NAME]
        parts = ctx.artifacts_dir.parts if ctx.artifacts_dir is not None else ()
        for i in range(len(parts) - 1, 0, -1):
            if parts[i - 1] == "tasks" and parts[i] == task:
                places.insert(0, Path(*parts[i - 1:]) / CASSETTE_NAME)
                break
        for place in places:
            if (self.cassette / place).is_file():
                return self.cassette / place
        raise CassetteError(f"cassette {self.cassette / places[0]}: no such file (the run "
                            f"replayed has no cassette of task {task})")

    def _env(self, ctx: AgentContext, token: str) -> dict[str, str]:
        local = f"http://127.0.0.1:{self.params.port}"
        return {
            **self.params.env,
            "AGENTBENCH_TASK": task_statement(ctx, self.params.failing_output_chars,
                                              "Fix the code so that it passes and verify by "
                                              "running it."),
            "AGENTBENCH_FAILING_COMMAND": ctx.failing_command,
            "AGENTBENCH_MAX_STEPS": str(ctx.max_steps),
            "AGENTBENCH_TOOL_TIMEOUT": str(int(ctx.task.environment.tool_timeout_sec)),
            "AGENTBENCH_MODEL": self.config.model.model_info().get("name") or "model",
            "OPENAI_BASE_URL": f"{local}/v1", "OPENAI_API_BASE": f"{local}/v1",
            "OPENAI_API_KEY": token,
            "ANTHROPIC_BASE_URL": local, "ANTHROPIC_API_KEY": token,
        }

    def _collect_trajectory(self, ctx: AgentContext) -> None:
        path = self.params.trajectory
        if path is None or ctx.programs is None or ctx.artifacts_dir is None:
            return
        data = ctx.programs.read(path, MAX_TRAJECTORY_BYTES)
        if data is None:
            return
        text = data.decode("utf-8", "replace")
        if self.redactor is not None:
            text = self.redactor.redact(text)
        ctx.artifacts_dir.mkdir(parents=True, exist_ok=True)
        (ctx.artifacts_dir / f"trajectory{Path(path).suffix or '.txt'}").write_text(text, "utf-8")
