"""One llm_v0 attempt against the fake OpenAI-compatible server (tests/fakes/openai_server.py)
and the fake toolbox (tests/support/fake_toolbox.py), as a run makes it: the helpers of the
llm_v0 agent tests (tests/unit/test_llm_agent*.py, test_llm_v0_verify.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pytest_agentbench.agents.llm_v0 import LLMAgent
from pytest_agentbench.agents.port import AgentContext, AgentOutcome
from pytest_agentbench.agents.variants import Variant, agent_builder
from pytest_agentbench.core.event_sink import EventSink
from pytest_agentbench.text.redaction import Redactor
from tests.fakes.openai_server import FakeOpenAIServer, Step, tool_reply
from tests.support.fake_toolbox import BUGGY, FAIL_OUT, FAILING, FIX, TASK, DirToolbox


def make_ctx(tmp_path: Path, *, max_steps: int = 30, redactor: Redactor | None = None,
             params: dict[str, Any] | None = None) -> AgentContext:
    work = tmp_path / "work"
    work.mkdir(parents=True, exist_ok=True)
    (work / "mathx.py").write_text(BUGGY)
    artifacts = tmp_path / "artifacts" / "agent"
    artifacts.mkdir(parents=True, exist_ok=True)
    events = EventSink(tmp_path / "artifacts" / "events.jsonl", "run-1", "fix-mean", "a-1",
                       redact_obj=(redactor or Redactor()).redact_obj)
    return AgentContext(task=TASK, task_dir=tmp_path, toolbox=DirToolbox(work),
                        events=events, failing_output=FAIL_OUT, failing_command=FAILING,
                        deadline=time.monotonic() + 60, max_steps=max_steps,
                        params=params or {}, artifacts_dir=artifacts)


def llm_variant(base_url: str, *, budgets: dict[str, Any] | None = None,
                model: dict[str, Any] | None = None, **params: Any) -> Variant:
    model_cfg = {"preset": "local", "name": "fake/model-1", "base_url": base_url,
                 "timeout_sec": 2.0, "max_retries": 2, "backoff_base_sec": 0.01,
                 "backoff_max_sec": 0.05, "max_tokens": 256, **(model or {})}
    return Variant("test", "llm_v0", params=params, model=model_cfg, budgets=budgets or {})


def make_agent_and_ctx(tmp_path: Path, base_url: str, *, max_steps: int = 30,
                       redactor: Redactor | None = None, **kw: Any
                       ) -> tuple[LLMAgent, AgentContext]:
    """The agent as a run makes it (agent_builder, once per run) and one attempt's context."""
    variant = llm_variant(base_url, **kw)
    agent = agent_builder(variant, redactor=redactor)()
    assert isinstance(agent, LLMAgent)
    return agent, make_ctx(tmp_path, max_steps=max_steps, redactor=redactor,
                           params=variant.params)


def run_agent(tmp_path: Path, steps: list[Step], **kw: Any
              ) -> tuple[AgentOutcome, FakeOpenAIServer, AgentContext]:
    with FakeOpenAIServer(steps) as srv:
        agent, ctx = make_agent_and_ctx(tmp_path, srv.base_url, **kw)
        outcome = agent.run(ctx)
    return outcome, srv, ctx


def conversation(ctx: AgentContext) -> list[dict[str, Any]]:
    assert ctx.artifacts_dir is not None
    text = (ctx.artifacts_dir / "conversation.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def event_types(ctx: AgentContext) -> list[str]:
    return [e["type"] for e in ctx.events.emitted]


SOLVE: list[Step] = [
    tool_reply("read_file", {"path": "mathx.py"}),
    tool_reply("apply_patch", {"unified_diff": FIX}),
    tool_reply("run", {"command": FAILING}),
    tool_reply("finish", {"summary": "mean divides by len(xs)"}),
]

