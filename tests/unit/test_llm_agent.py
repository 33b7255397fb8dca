"""The llm_v0 agent loop against a real OpenAI-compatible server on loopback and a fake toolbox.

The toolbox is the stand-in backed by a temporary directory (tests/support/fake_toolbox.py; the
real one is tested in test_tools.py): edits are plain string replacements and `run` evaluates a
tiny "test" in Python, so these tests exercise the loop, its resilience, configuration, secrets and
accounting, not the sandbox. Its stop conditions and budgets: test_llm_agent_stops.py; the
helpers: tests/support/llm_agent_runs.py.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.agents.llm_config import LLMAgentConfig, load_prompt
from pytest_agentbench.agents.llm_v0 import _Run
from pytest_agentbench.agents.port import AgentError
from pytest_agentbench.agents.variants import VariantError, agent_builder, load_variant
from pytest_agentbench.llm import ModelConfigError, OpenAICompatClient, resolve_model_config
from pytest_agentbench.schemas.taxonomy import Reason
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
    FAILING,
    FIX,
    FIXED,
)
from tests.support.llm_agent_runs import (
    SOLVE,
    conversation,
    event_types,
    llm_variant,
    make_agent_and_ctx,
    run_agent,
)

KEY = "sk-test-PLANTED0123456789abcdefXYZ"


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



