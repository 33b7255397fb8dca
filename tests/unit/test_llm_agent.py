"""The llm_v0 agent loop against a real OpenAI-compatible server on loopback and a fake toolbox.

The toolbox is the stand-in backed by a temporary directory (tests/support/fake_toolbox.py; the
real one is tested in test_tools.py): edits are plain string replacements and `run` evaluates a
tiny "test" in Python, so these tests exercise the loop, its stop conditions, budgets and
accounting, not the sandbox.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.agents.llm_config import LLMAgentConfig, load_prompt
from pytest_agentbench.agents.llm_v0 import LLMAgent, _Run
from pytest_agentbench.agents.port import AgentContext, AgentError, AgentOutcome
from pytest_agentbench.agents.variants import Variant, VariantError, agent_builder, load_variant
from pytest_agentbench.core.event_sink import EventSink
from pytest_agentbench.llm import ModelConfigError, OpenAICompatClient, resolve_model_config
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.text.redaction import Redactor
from tests.fakes.openai_server import (
    FakeOpenAIServer,
    Fault,
    Reply,
    Slow,
    Step,
    bad_arguments,
    json_in_content,
    no_choices,
    non_json,
    tool_reply,
)
from tests.support.fake_toolbox import (
    BUGGY,
    FAIL_OUT,
    FAILING,
    FIX,
    FIXED,
    TASK,
    DirToolbox,
)

KEY = "sk-test-PLANTED0123456789abcdefXYZ"


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


# -- the happy path ------------------------------------------------------------------------------
def test_scripted_conversation_edits_verifies_and_finishes(tmp_path: Path) -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120, "cost": 0.002}
    steps: list[Step] = [Reply(tool_calls=s.tool_calls, usage=usage)  # type: ignore[union-attr]
                         for s in SOLVE]
    outcome, srv, ctx = run_agent(tmp_path, steps)

    assert (outcome.finished_by, outcome.reason, outcome.steps) == ("finish", None, 4)
    assert outcome.summary == "mean divides by len(xs)"
    assert (tmp_path / "work" / "mathx.py").read_text() == FIXED
    assert [c[0] for c in ctx.toolbox.calls] == ["read_file", "apply_patch", "run", "finish"]  # type: ignore[attr-defined]
    u = outcome.usage
    assert u is not None
    assert (u.llm_calls, u.prompt_tokens, u.completion_tokens, u.total_tokens) == (4, 400, 80, 480)
    assert u.cost_usd == pytest.approx(0.008) and u.retries == 0 and u.fallback_tool_calls == 0
    assert u.llm_latency_ms >= 0
    m = outcome.model
    assert m is not None and m.name == "fake/model-1" and m.provider == "local"
    assert m.prompt_version == load_prompt("system_v1")[1]
    assert m.config_sources["model"] == "variant" and m.preset_registry_version

    first = srv.requests[0].json
    assert [msg["role"] for msg in first["messages"]] == ["system", "user"]
    assert FAILING in first["messages"][1]["content"]
    assert "FAILED tests/test_mathx.py::test_mean" in first["messages"][1]["content"]
    assert {t["function"]["name"] for t in first["tools"]} >= {"read_file", "apply_patch", "finish"}
    assert first["max_tokens"] == 256 and first["model"] == "fake/model-1"
    second = srv.requests[1].json["messages"]
    assistant, tool = second[2], second[3]
    assert assistant["content"] == ""  # a string next to tool_calls, never null
    assert tool["role"] == "tool" and tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert "return sum(xs) / (len(xs) - 1)" in tool["content"]
    assert "exit_code: 0" in srv.requests[3].json["messages"][-1]["content"]

    lines = conversation(ctx)
    assert "meta" in lines[0] and lines[-1]["stop"]["finished_by"] == "finish"
    assistant_lines = [ln for ln in lines if ln.get("message", {}).get("role") == "assistant"]
    assert len(assistant_lines) == 4
    assert assistant_lines[0]["usage"]["cost_usd"] == pytest.approx(0.002)
    assert {"latency_ms", "retries", "tool_calls_source"} <= set(assistant_lines[0])
    types = event_types(ctx)
    assert types.count("agent_turn_started") == types.count("llm_request") == 4
    assert types.count("llm_response") == 4 and "note" in types
    request_events = ctx.events.of_type("llm_request")
    assert len({e["prompt_sha256"] for e in request_events}) == 4
    assert request_events[2]["messages"] == 6


# -- resilience ----------------------------------------------------------------------------------
def test_429_with_retry_after_then_success_counts_one_retry(tmp_path: Path) -> None:
    steps: list[Step] = [Fault(429, retry_after="0.3"), *SOLVE]
    started = time.monotonic()
    outcome, srv, ctx = run_agent(tmp_path, steps, model={"backoff_max_sec": 5.0})
    assert time.monotonic() - started >= 0.3
    assert outcome.finished_by == "finish" and outcome.usage is not None
    assert outcome.usage.retries == 1 and outcome.usage.llm_calls == 4
    assert len(srv.requests) == 5
    [retry] = ctx.events.of_type("llm_retry")
    assert (retry["attempt"], retry["status"], retry["wait_sec"]) == (1, 429, 0.3)


def test_500s_until_exhaustion_raise_llm_error(tmp_path: Path) -> None:
    steps: list[Step] = [Fault(500), Fault(502), Fault(503)]
    with pytest.raises(AgentError) as info:
        run_agent(tmp_path, steps, model={"max_retries": 2})
    err = info.value
    assert err.reason == Reason.LLM_ERROR and err.sub_reason == "RETRIES_EXHAUSTED"
    assert "503" in str(err)
    assert err.usage.retries == 2 and err.usage.llm_calls == 0  # type: ignore[attr-defined]
    assert len(list((tmp_path / "artifacts").rglob("conversation.jsonl"))) == 1


def test_reply_slower_than_the_timeout_is_llm_error(tmp_path: Path) -> None:
    steps: list[Step] = [Slow(2.0, tool_reply("finish", {"summary": "late"}))]
    started = time.monotonic()
    with pytest.raises(AgentError) as info:
        run_agent(tmp_path, steps, model={"timeout_sec": 0.3, "max_retries": 0})
    assert time.monotonic() - started < 1.9
    assert info.value.reason == Reason.LLM_ERROR and "timeout" in str(info.value)


def test_malformed_body_is_retried_once_then_the_loop_goes_on(tmp_path: Path) -> None:
    outcome, srv, _ = run_agent(tmp_path, [non_json(), *SOLVE])
    assert outcome.finished_by == "finish" and len(srv.requests) == 5
    assert outcome.usage is not None and outcome.usage.retries == 1


def test_malformed_bodies_twice_are_llm_error(tmp_path: Path) -> None:
    with pytest.raises(AgentError) as info:
        run_agent(tmp_path, [no_choices(), no_choices()])
    assert info.value.reason == Reason.LLM_ERROR and info.value.sub_reason == "BAD_RESPONSE"


def test_invalid_arguments_and_unknown_tools_go_back_to_the_model(tmp_path: Path) -> None:
    steps: list[Step] = [bad_arguments("read_file"), tool_reply("rm_rf", {"path": "/"}),
                         tool_reply("read_file", {"path": "mathx.py", "bogus": 1}), *SOLVE]
    outcome, srv, ctx = run_agent(tmp_path, steps)
    assert outcome.finished_by == "finish"
    first_obs = srv.requests[1].json["messages"][-1]
    assert first_obs["role"] == "tool" and "INVALID_ARGUMENTS" in first_obs["content"]
    assert '{"path": "a.py",' in first_obs["content"]  # the raw text, so the model sees it
    assert "UNKNOWN_TOOL" in srv.requests[2].json["messages"][-1]["content"]
    assert "INVALID_ARGUMENTS" in srv.requests[3].json["messages"][-1]["content"]
    # neither the broken call nor the unknown tool reached the toolbox
    assert ctx.toolbox.calls[0] == ("read_file", {"path": "mathx.py", "bogus": 1})  # type: ignore[attr-defined]


def test_tool_calls_written_as_text_still_work(tmp_path: Path) -> None:
    steps: list[Step] = [
        json_in_content("read_file", {"path": "mathx.py"}, fenced=True),
        json_in_content("apply_patch", {"unified_diff": FIX}),
        json_in_content("run", {"command": FAILING}),
        json_in_content("finish", {"summary": "fixed"}),
    ]
    outcome, srv, _ = run_agent(tmp_path, steps)
    assert outcome.finished_by == "finish"
    assert (tmp_path / "work" / "mathx.py").read_text() == FIXED
    assert outcome.usage is not None and outcome.usage.fallback_tool_calls == 4
    messages = srv.requests[1].json["messages"]
    assert messages[2]["role"] == "assistant" and "tool_calls" not in messages[2]
    assert messages[3]["role"] == "user" and messages[3]["content"].startswith("[read_file]")
    assert all(m["role"] != "tool" for r in srv.requests for m in r.json["messages"])


# -- stop conditions -----------------------------------------------------------------------------
def test_max_steps_gives_up(tmp_path: Path) -> None:
    read = tool_reply("read_file", {"path": "mathx.py"})
    outcome, srv, _ = run_agent(tmp_path, [read] * 10, max_steps=3)
    assert (outcome.finished_by, outcome.reason, outcome.sub_reason) == (
        "max_steps", Reason.AGENT_GAVE_UP, "MAX_STEPS")
    assert len(srv.requests) == 3 and outcome.steps == 3


def test_unchanged_test_signature_is_stuck(tmp_path: Path) -> None:
    run = tool_reply("run", {"command": FAILING})
    outcome, srv, _ = run_agent(tmp_path, [run] * 10, stuck_after=3)
    assert (outcome.finished_by, outcome.reason) == ("stuck", Reason.AGENT_STUCK)
    assert len(srv.requests) == 3  # the baseline is the first observation of the signature
    assert "test_mathx.py::test_mean" in outcome.summary


def test_changing_test_output_is_not_stuck(tmp_path: Path) -> None:
    counter = iter(range(100))

    def grade(root: Path) -> tuple[int, str]:
        return 1, f"FAILED tests/test_mathx.py::test_case_{next(counter)}\n"

    steps: list[Step] = [tool_reply("run", {"command": "python -m pytest -x"})] * 6
    with FakeOpenAIServer([*steps, *SOLVE[3:]]) as srv:
        # the grade never passes: finish is taken at its word here (verification has its own tests)
        agent, ctx = make_agent_and_ctx(tmp_path, srv.base_url, stuck_after=2,
                                        verify_finish=False)
        ctx.toolbox.grade = grade  # type: ignore[attr-defined]
        outcome = agent.run(ctx)
    assert outcome.finished_by == "finish"


def test_rejected_patches_are_tool_error(tmp_path: Path) -> None:
    bad = tool_reply("apply_patch", {"unified_diff": FIX.replace("(len(xs) - 1)", "len(ys)")})
    outcome, srv, _ = run_agent(tmp_path, [bad] * 10)
    assert (outcome.finished_by, outcome.reason, outcome.sub_reason) == (
        "patch_rejected", Reason.TOOL_ERROR, "PATCH_REJECTED")
    assert len(srv.requests) == 3


def test_a_good_patch_resets_the_rejection_count(tmp_path: Path) -> None:
    bad = tool_reply("apply_patch", {"unified_diff": "--- a/mathx.py\n+++ b/mathx.py\n-nope\n"})
    steps: list[Step] = [bad, bad, tool_reply("apply_patch", {"unified_diff": FIX}), bad, bad,
                         tool_reply("finish", {"summary": "ok"})]
    outcome, _, _ = run_agent(tmp_path, steps)
    assert outcome.finished_by == "finish"


def test_turns_without_tool_calls_and_no_op_edits_are_no_progress(tmp_path: Path) -> None:
    same = tool_reply("write_file", {"path": "mathx.py", "content": BUGGY})
    steps: list[Step] = [Reply(content="Let me think."), same, Reply(content="Hmm.")]
    outcome, srv, _ = run_agent(tmp_path, steps)
    assert (outcome.finished_by, outcome.reason) == ("no_progress", Reason.AGENT_NO_PROGRESS)
    assert len(srv.requests) == 3
    nudge = srv.requests[1].json["messages"][-1]
    assert nudge["role"] == "user" and "no tool call" in nudge["content"]


# -- budgets (checked before each call) ----------------------------------------------------------
def test_cost_cap_stops_before_the_call_that_would_exceed_it(tmp_path: Path) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15, "cost": 0.01}
    read = Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "mathx.py"}}],
                 usage=usage)
    outcome, srv, ctx = run_agent(tmp_path, [read] * 10, budgets={"max_cost_usd": 0.035})
    assert (outcome.finished_by, outcome.reason, outcome.sub_reason) == (
        "budget", Reason.AGENT_GAVE_UP, "BUDGET_COST")
    assert len(srv.requests) == 3  # 0.03 spent; a 4th call (~0.01) would pass 0.035
    assert outcome.usage is not None and outcome.usage.cost_usd == pytest.approx(0.03)
    stop = ctx.events.of_type("note")[-1]
    assert stop["kind"] == "agent_stop" and stop["data"]["sub_reason"] == "BUDGET_COST"


def test_token_and_step_budgets(tmp_path: Path) -> None:
    outcome, srv, _ = run_agent(tmp_path, [], budgets={"max_tokens_total": 300})
    assert outcome.sub_reason == "BUDGET_TOKENS" and len(srv.requests) == 0
    read = tool_reply("read_file", {"path": "mathx.py"})
    outcome, srv, _ = run_agent(tmp_path / "b", [read] * 5, budgets={"max_steps": 2})
    assert outcome.sub_reason == "BUDGET_STEPS" and len(srv.requests) == 2
    assert outcome.usage is not None and outcome.usage.cost_usd is None  # nobody reported cost


def test_wall_budget(tmp_path: Path) -> None:
    slow = Slow(0.3, tool_reply("read_file", {"path": "mathx.py"}))
    outcome, srv, _ = run_agent(tmp_path, [slow] * 5, budgets={"max_wall_sec": 0.5})
    assert outcome.sub_reason == "BUDGET_WALL" and len(srv.requests) == 1


# -- configuration and secrets -------------------------------------------------------------------
def test_missing_model_or_key_fails_when_the_agent_is_built(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once per run, before any attempt, as one line."""
    with pytest.raises(VariantError, match="^variant test: no model configured"):
        agent_builder(llm_variant("http://127.0.0.1:9", model={"name": None, "model": None}))
    for name in ("AGENTBENCH_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(VariantError, match="needs an API key"):
        agent_builder(llm_variant("http://127.0.0.1:9", model={"preset": "openrouter"}))
    with pytest.raises(VariantError, match="^variant test: params stuck_after: "):
        agent_builder(llm_variant("http://127.0.0.1:9", stuck_after="often"))


def test_planted_key_appears_in_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTBENCH_API_KEY", KEY)
    steps: list[Step] = [
        tool_reply("read_file", {"path": "settings.py"}),
        Reply(content=f"The key is {KEY}; I will not use it.",
              tool_calls=[{"name": "run", "arguments": {"command": f"echo {KEY}"}}]),
        Fault(429, retry_after="0", body=json.dumps({"error": {"message": f"bad key {KEY}"}})),
        *SOLVE,
    ]
    with FakeOpenAIServer(steps) as srv:
        agent, ctx = make_agent_and_ctx(tmp_path, srv.base_url, model={"preset": "openrouter"})
        (tmp_path / "work" / "settings.py").write_text(f'API_KEY = "{KEY}"\n')
        outcome = agent.run(ctx)
    assert outcome.finished_by == "finish"
    assert srv.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was used...
    assert KEY in srv.requests[1].json["messages"][-1]["content"]
    written = [p for p in (tmp_path / "artifacts").rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"conversation.jsonl", "events.jsonl"}
    for path in written:  # ...and written nowhere
        assert KEY not in path.read_text(), path
        assert KEY[8:] not in path.read_text(), path
    assert "[REDACTED" in (ctx.artifacts_dir / "conversation.jsonl").read_text()  # type: ignore[operator]


def test_prompt_version_and_bundled_variants() -> None:
    text, version = load_prompt("system_v1")
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert version == f"system_v1@sha256:{digest}" and "finish" in text
    for name, preset in (("baseline", "openrouter"), ("local", "local")):
        variant = load_variant(name)
        assert variant.agent == "llm_v0"
        resolved = resolve_model_config(variant=variant.model)
        assert resolved.preset.name == preset and resolved.values["model"]
        assert resolved.values["temperature"] == 0.2
    assert load_variant("baseline").budgets["max_cost_usd"] > 0


def test_the_configuration_is_checked_without_calling_the_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AGENTBENCH_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    baseline = load_variant("baseline").config()
    with pytest.raises(ModelConfigError, match="OPENROUTER_API_KEY"):
        LLMAgentConfig.resolve(baseline)
    local = LLMAgentConfig.resolve(load_variant("local").config())  # no key needed
    assert local.model.preset.name == "local"
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    resolved = LLMAgentConfig.resolve(baseline, {"model": "cli/model", "temperature": 0.7}).model
    assert resolved.values["model"] == "cli/model" and resolved.sources["temperature"] == "cli"
    with pytest.raises(ModelConfigError, match="prompt"):
        LLMAgentConfig.resolve({**baseline, "params": {"prompt": "system_v999"}})


# -- the harness's own cost per step -------------------------------------------------------------
def test_harness_overhead_per_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop's own time per step: loop time minus the time spent inside the model client
    (measured around `chat` with perf_counter), over 20 steps against the loopback server with
    a cheap toolbox. Client construction (once per attempt) is outside the loop."""
    in_model: list[float] = []
    real_chat = OpenAICompatClient.chat

    def timed_chat(self: OpenAICompatClient, *args: Any, **kw: Any) -> Any:
        started = time.perf_counter()
        try:
            return real_chat(self, *args, **kw)
        finally:
            in_model.append(time.perf_counter() - started)

    monkeypatch.setattr(OpenAICompatClient, "chat", timed_chat)
    steps: list[Step] = [tool_reply("read_file", {"path": "mathx.py"})] * 19
    steps.append(tool_reply("finish", {"summary": "done"}))
    with FakeOpenAIServer(steps) as srv:  # nothing is fixed: finish unverified, as before
        agent, ctx = make_agent_and_ctx(tmp_path, srv.base_url, verify_finish=False)
        run = _Run(ctx, agent.config, None, None)
        started = time.perf_counter()
        outcome = run.loop()
        loop_ms = (time.perf_counter() - started) * 1000
    assert outcome.finished_by == "finish" and outcome.usage is not None
    assert outcome.usage.llm_calls == len(in_model) == 20
    model_ms = sum(in_model) * 1000
    overhead = (loop_ms - model_ms) / 20
    print(f"\nllm_v0 harness overhead: {overhead:.2f} ms/step "
          f"(loop {loop_ms:.0f} ms, in the model client {model_ms:.0f} ms, 20 steps)")
    assert overhead < 50



# -- the same failing call, again and again (issue 25 item 7) ------------------------------------
def test_the_same_invalid_call_repeated_stops_well_before_max_steps(tmp_path: Path) -> None:
    steps: list[Step] = [tool_reply("finish", {}) for _ in range(30)]
    outcome, srv, _ = run_agent(tmp_path, steps)
    assert (outcome.finished_by, outcome.reason, outcome.sub_reason) == (
        "repeated_error", Reason.AGENT_NO_PROGRESS, "REPEATED_TOOL_ERROR")
    assert len(srv.requests) == 3  # max_repeated_errors, not max_steps (30)
    assert "finish call failed 3 times in a row with INVALID_ARGUMENTS" in outcome.summary


def test_a_different_call_or_a_success_starts_the_count_again(tmp_path: Path) -> None:
    bad = tool_reply("read_file", {"path": "mathx.py", "bogus": 1})
    other = tool_reply("read_file", {"path": "mathx.py", "bogus": 2})
    steps: list[Step] = [bad, bad, tool_reply("read_file", {"path": "mathx.py"}), bad, bad,
                         other, bad, bad, *SOLVE]
    outcome, _, _ = run_agent(tmp_path, steps)
    assert outcome.finished_by == "finish"


def test_unparseable_arguments_repeated_are_the_same_call(tmp_path: Path) -> None:
    steps: list[Step] = [bad_arguments("read_file") for _ in range(10)]
    outcome, srv, _ = run_agent(tmp_path, steps, max_repeated_errors=4, max_noop=99)
    assert outcome.sub_reason == "REPEATED_TOOL_ERROR" and len(srv.requests) == 4
