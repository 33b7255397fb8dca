"""The OpenAI-compatible client against a real HTTP server on loopback (no httpx mocking)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pytest_agentbench.llm import (
    PRESET_REGISTRY_VERSION,
    ChatParams,
    LLMAuthError,
    LLMBadResponse,
    LLMRequestError,
    LLMRetryExhausted,
    ModelClient,
    ModelConfigError,
    OpenAICompatClient,
    parse_fallback_tool_calls,
    resolve_model_config,
)
from pytest_agentbench.text.redaction import Redactor
from tests.fakes.openai_server import (
    FakeOpenAIServer,
    Fault,
    Raw,
    Reply,
    Slow,
    Step,
    bad_arguments,
    json_in_content,
    no_choices,
    non_json,
    tool_reply,
)

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
         for n in ("read_file", "write_file", "finish")]
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
PARAMS = ChatParams(model="fake/model-1", temperature=0.0, max_tokens=256)
KEY = "sk-test-0123456789abcdefghij"


Events = list[tuple[str, dict[str, Any]]]


@contextmanager
def served(steps: list[Step], events: Events | None = None,
           **kw: Any) -> Iterator[tuple[FakeOpenAIServer, OpenAICompatClient]]:
    """A fake server running `steps` and a client pointed at it (fast backoff for tests).
    `srv.requests` stays readable after the block."""
    options: dict[str, Any] = {"timeout_sec": 2.0, "max_retries": 3, "backoff_base_sec": 0.05,
                               "backoff_max_sec": 0.2}
    options.update(kw)
    sink = (lambda name, data: events.append((name, data))) if events is not None else None
    with FakeOpenAIServer(steps) as srv, OpenAICompatClient(
            srv.base_url, KEY, None, on_event=sink, **options) as client:
        yield srv, client


def test_happy_path_parses_native_tool_call_and_usage() -> None:
    usage = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150, "cost": 0.00042,
             "prompt_tokens_details": {"cached_tokens": 100}}
    steps: list[Step] = [tool_reply("read_file", {"path": "src/a.py"}, usage=usage,
                                    model="vendor/model-2024")]
    with served(steps) as (srv, client):
        assert isinstance(client, ModelClient)
        result = client.chat(MESSAGES, TOOLS, PARAMS)
    sent = srv.requests[0].json
    assert result.tool_calls_source == "native"
    [call] = result.tool_calls
    assert (call.name, call.arguments, call.arguments_error) == ("read_file", {"path": "src/a.py"},
                                                                  None)
    assert result.finish_reason == "tool_calls"
    assert result.model == "vendor/model-2024"
    assert result.retries == 0 and result.latency_ms >= 0
    assert result.usage.prompt_tokens == 120 and result.usage.completion_tokens == 30
    assert result.usage.total_tokens == 150 and result.usage.cost_usd == pytest.approx(0.00042)
    assert result.usage.cached_tokens == 100
    assert sent["model"] == "fake/model-1" and sent["messages"] == MESSAGES
    assert sent["tools"] == TOOLS and sent["temperature"] == 0.0 and "top_p" not in sent
    assert srv.requests[0].headers["authorization"] == f"Bearer {KEY}"
    json.dumps(result.to_dict())  # plain JSON types only


def test_assistant_message_round_trip_never_sends_null_content() -> None:
    with served([tool_reply("read_file", {"path": "a"}), Reply(content="ok")]) as (srv, client):
        first = client.chat(MESSAGES, TOOLS, PARAMS)
        echoed = first.assistant_message()
        assert echoed["content"] == "" and echoed["tool_calls"][0]["function"]["name"]
        history = [*MESSAGES, {"role": "assistant", "content": None,
                               "tool_calls": [{"id": "c1", "function": {
                                   "name": "read_file", "arguments": {"path": "a"}}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "text"}]
        client.chat(history, TOOLS, PARAMS)
        sent = srv.requests[1].json["messages"][1]
    assert sent["content"] == ""
    assert sent["tool_calls"][0]["function"]["arguments"] == '{"path": "a"}'
    assert sent["tool_calls"][0]["type"] == "function"


def test_429_with_retry_after_waits_then_succeeds() -> None:
    events: Events = []
    steps: list[Step] = [Fault(429, retry_after="1"), Reply(content="hi")]
    with served(steps, events, backoff_max_sec=5.0) as (srv, client):
        started = time.monotonic()
        result = client.chat(MESSAGES, None, PARAMS)
        waited = time.monotonic() - started
    assert 0.9 <= waited < 3.0
    assert result.retries == 1 and result.message.content == "hi"
    assert result.wall_ms >= 900 > result.latency_ms
    assert len(srv.requests) == 2
    assert events == [("llm_retry", {"attempt": 1, "status": 429, "wait_sec": 1.0,
                                     "error": "HTTP 429: injected"})]


def test_retry_after_is_capped_by_backoff_max() -> None:
    steps: list[Step] = [Fault(503, retry_after="30"), Reply(content="hi")]
    with served(steps, backoff_max_sec=0.1) as (_, client):
        started = time.monotonic()
        assert client.chat(MESSAGES, None, PARAMS).retries == 1
    assert time.monotonic() - started < 1.0


def test_500_until_exhausted_raises_retry_exhausted() -> None:
    events: Events = []
    with served([Fault(500)] * 10, events, max_retries=2) as (srv, client), \
            pytest.raises(LLMRetryExhausted) as info:
        client.chat(MESSAGES, None, PARAMS)
    assert len(srv.requests) == 3
    assert info.value.status == 500 and info.value.retries == 2 and info.value.attempts == 3
    assert [e[1]["attempt"] for e in events] == [1, 2]
    assert all(0 <= e[1]["wait_sec"] <= 0.2 for e in events)


def test_slow_response_times_out_then_retry_succeeds() -> None:
    events: Events = []
    steps: list[Step] = [Slow(2.0, Reply(content="late")), Reply(content="fast")]
    with served(steps, events, timeout_sec=0.3) as (_, client):
        result = client.chat(MESSAGES, None, PARAMS)
    assert result.message.content == "fast" and result.retries == 1
    assert events[0][1]["status"] is None and "timeout" in events[0][1]["error"]


def test_slow_responses_until_exhausted() -> None:
    steps: list[Step] = [Slow(2.0, Reply(content="late"))] * 3
    with served(steps, timeout_sec=0.2, max_retries=1) as (srv, client), \
            pytest.raises(LLMRetryExhausted, match="timeout"):
        client.chat(MESSAGES, None, PARAMS)
    assert len(srv.requests) == 2


def test_deadline_stops_retrying_early() -> None:
    steps: list[Step] = [Fault(503, retry_after="0.5")] * 5
    deadline = time.monotonic() + 0.3
    with served(steps, max_retries=5, backoff_max_sec=5.0) as (srv, client), \
            pytest.raises(LLMRetryExhausted, match="deadline"):
        client.chat(MESSAGES, None, ChatParams(model="m", deadline_monotonic=deadline))
    assert len(srv.requests) == 1


def test_loopback_servers_bypass_environment_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # would refuse every connection
    monkeypatch.setenv("NO_PROXY", "")
    with served([Reply(content="direct")]) as (_, client):
        assert client.chat(MESSAGES, None, PARAMS).message.content == "direct"


def test_connect_error_is_retried_then_exhausted() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAICompatClient(f"http://127.0.0.1:{port}/v1", None, timeout_sec=1.0,
                                max_retries=2, backoff_base_sec=0.01, backoff_max_sec=0.02)
    with client, pytest.raises(LLMRetryExhausted, match="ConnectError") as info:
        client.chat(MESSAGES, None, PARAMS)
    assert info.value.retries == 2 and info.value.status is None


def test_auth_error_is_not_retried() -> None:
    with served([Fault(401), Reply(content="never")]) as (srv, client), \
            pytest.raises(LLMAuthError) as info:
        client.chat(MESSAGES, None, PARAMS)
    assert info.value.status == 401 and len(srv.requests) == 1


def test_other_4xx_is_a_request_error_without_retry() -> None:
    with served([Fault(402), Reply(content="never")]) as (srv, client), \
            pytest.raises(LLMRequestError):
        client.chat(MESSAGES, None, PARAMS)
    assert len(srv.requests) == 1


@pytest.mark.parametrize("bad", [non_json(), no_choices(), Raw("[1, 2]")],
                         ids=["non-json", "no-choices", "not-an-object"])
def test_malformed_body_is_retried_once_then_bad_response(bad: Raw) -> None:
    with served([bad, bad, Reply(content="never")], max_retries=5) as (srv, client), \
            pytest.raises(LLMBadResponse) as info:
        client.chat(MESSAGES, None, PARAMS)
    assert len(srv.requests) == 2 and info.value.retries == 1


def test_transient_malformed_body_recovers() -> None:
    with served([non_json(), Reply(content="ok")]) as (srv, client):
        assert client.chat(MESSAGES, None, PARAMS).retries == 1


def test_error_object_in_200_body_is_retried_by_its_code() -> None:
    upstream_down = Raw(json.dumps({"error": {"code": 502, "message": "provider down"}}))
    with served([upstream_down, upstream_down, Reply(content="ok")]) as (srv, client):
        assert client.chat(MESSAGES, None, PARAMS).retries == 2


def test_invalid_json_arguments_become_arguments_error() -> None:
    with served([bad_arguments("write_file", '{"path": "a.py", ')]) as (srv, client):
        result = client.chat(MESSAGES, TOOLS, PARAMS)
    [call] = result.tool_calls
    assert call.name == "write_file" and call.arguments == {}
    assert call.arguments_error and "not valid JSON" in call.arguments_error
    assert call.raw_arguments == '{"path": "a.py", '
    echoed = result.assistant_message()["tool_calls"][0]["function"]
    assert echoed["arguments"] == call.raw_arguments


@pytest.mark.parametrize("fenced", [False, True], ids=["plain", "fenced"])
def test_fallback_json_tool_call_in_content(fenced: bool) -> None:
    reply = json_in_content("read_file", {"path": "README.md"}, fenced=fenced)
    with served([reply]) as (srv, client):
        result = client.chat(MESSAGES, TOOLS, PARAMS)
    assert result.tool_calls_source == "fallback_json"
    [call] = result.tool_calls
    assert (call.name, call.arguments) == ("read_file", {"path": "README.md"})
    assert "tool_calls" not in result.assistant_message()


def test_plain_text_without_tools_has_no_tool_calls() -> None:
    with served([json_in_content("read_file", {"path": "x"})]) as (srv, client):
        result = client.chat(MESSAGES, None, PARAMS)  # no tools offered: nothing counts
    assert result.tool_calls_source == "none" and result.tool_calls == []


def test_fallback_parser_shapes_and_unknown_names() -> None:
    names = {"read_file", "write_file"}
    text = ('First {"tool": "read_file", "args": {"path": "a"}} then\n```json\n'
            '[{"name": "write_file", "arguments": "{\\"path\\": \\"b\\"}"},'
            ' {"name": "rm_rf", "arguments": {}}]\n```\nand {"function": {"name": "read_file",'
            ' "arguments": {"path": "c"}}} plus {"unrelated": {"name": "read_file"}} and {oops')
    calls = parse_fallback_tool_calls(text, names)
    assert [(c.name, c.arguments) for c in calls] == [
        ("read_file", {"path": "a"}), ("write_file", {"path": "b"}), ("read_file", {"path": "c"})]
    assert parse_fallback_tool_calls('{"tool_calls": [{"name": "read_file"}]}', names)[0].name \
        == "read_file"
    assert parse_fallback_tool_calls('{"name": "rm_rf", "arguments": {}}', names) == []


def test_dynamic_step_sees_request() -> None:
    def echo(request: Any) -> Reply:
        return Reply(content=f"{len(request['messages'])} messages")

    with served([echo]) as (srv, client):
        assert client.chat(MESSAGES, None, PARAMS).message.content == "1 messages"
        # script exhausted: the default answer calls `finish`
        assert client.chat(MESSAGES, TOOLS, PARAMS).tool_calls[0].name == "finish"


def test_openrouter_preset_sends_key_attribution_and_usage_opt_in(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTBENCH_API_KEY", raising=False)
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-v1-" + "a" * 40)
    usage = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10, "cost": 0.0015}
    with FakeOpenAIServer([Reply(content="hello", usage=usage)]) as srv:
        cfg = resolve_model_config(cli={"base_url": srv.base_url, "model": "openai/gpt-4o-mini"},
                                   variant={"preset": "openrouter", "temperature": 0.2})
        with cfg.make_client() as client:  # noqa: SIM117 (cfg needs the server's URL)
            result = client.chat(MESSAGES, None, cfg.chat_params())
    request = srv.requests[0]
    assert request.headers["authorization"] == "Bearer sk-or-v1-" + "a" * 40
    assert request.headers["http-referer"].startswith("https://")
    assert request.headers["x-title"] == "pytest-agentbench"
    assert request.headers["x-openrouter-title"] == "pytest-agentbench"
    assert request.json["usage"] == {"include": True}
    assert request.json["model"] == "openai/gpt-4o-mini" and request.json["temperature"] == 0.2
    assert result.usage.cost_usd == pytest.approx(0.0015)


def test_generic_key_env_wins_and_local_presets_need_no_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"AGENTBENCH_API_KEY": "generic-key-123", "OPENAI_API_KEY": "sk-openai-specific-key"}
    assert resolve_model_config(variant={"preset": "openai"}).api_key(env) == (
        "generic-key-123", "AGENTBENCH_API_KEY")
    assert resolve_model_config(variant={"preset": "openai"}).api_key(
        {"OPENAI_API_KEY": "x" * 10}) == ("x" * 10, "OPENAI_API_KEY")
    with pytest.raises(ModelConfigError, match="OPENROUTER_API_KEY"):
        resolve_model_config().make_client(environ={})
    with FakeOpenAIServer([Reply(content="ok")]) as srv:
        cfg = resolve_model_config(cli={"preset": "ollama", "base_url": srv.base_url,
                                        "model": "qwen2.5-coder"})
        with cfg.make_client(environ={}) as client:  # noqa: SIM117 (needs the server's URL)
            client.chat(MESSAGES, None, cfg.chat_params())
        assert "authorization" not in srv.requests[0].headers
        assert "usage" not in srv.requests[0].json


def test_config_precedence_and_sources() -> None:
    cfg = resolve_model_config(
        cli={"temperature": "0.7", "seed": None, "max_retries": 1},
        variant={"preset": "vllm", "name": "my/model", "temperature": 0.1, "top_p": 0.9,
                 "seed": 42, "headers": {"X-Team": "eval"}},
    )
    assert cfg.values["temperature"] == 0.7 and cfg.sources["temperature"] == "cli"
    assert cfg.values["max_retries"] == 1 and cfg.sources["max_retries"] == "cli"
    assert cfg.values["model"] == "my/model" and cfg.sources["model"] == "variant"
    assert cfg.values["seed"] == 42 and cfg.sources["seed"] == "variant"
    assert cfg.values["top_p"] == 0.9 and cfg.sources["top_p"] == "variant"
    assert cfg.values["base_url"] == "http://127.0.0.1:8000/v1"
    assert cfg.sources["base_url"] == "preset:vllm"
    assert cfg.values["timeout_sec"] == 600.0 and cfg.sources["timeout_sec"] == "preset:vllm"
    assert cfg.values["max_tokens"] == 4096 and cfg.sources["max_tokens"] == "default"
    assert cfg.sources["preset"] == "variant" and cfg.headers == {"X-Team": "eval"}
    info = cfg.model_info()
    assert info["provider"] == "vllm" and info["name"] == "my/model"
    assert info["preset_registry_version"] == PRESET_REGISTRY_VERSION
    default = resolve_model_config()
    assert default.preset.name == "openrouter" and default.sources["preset"] == "default"
    assert default.values["base_url"] == "https://openrouter.ai/api/v1"


@pytest.mark.parametrize(("cli", "variant", "message"), [
    ({"temperature": "hot"}, {}, "cli temperature: expected a number"),
    ({}, {"max_tokens": True}, "variant max_tokens: expected an integer"),
    ({}, {"top_p": 1.5}, "out of range"),
    ({}, {"temprature": 0.1}, "unknown model setting 'temprature'"),
    ({"preset": "nope"}, {}, "unknown preset 'nope'"),
    ({"base_url": "openrouter.ai/api/v1"}, {}, "cli base_url: expected an http"),
])
def test_config_errors_name_source_and_key(cli: dict[str, Any], variant: dict[str, Any],
                                           message: str) -> None:
    with pytest.raises(ModelConfigError, match=message):
        resolve_model_config(cli=cli, variant=variant)


def test_missing_model_is_a_clear_error() -> None:
    with pytest.raises(ModelConfigError, match="no model configured"):
        resolve_model_config().chat_params()


def test_redaction_of_planted_keys_in_nested_objects() -> None:
    planted = "sk-or-v1-" + "f00d" * 16
    env = {"OPENROUTER_API_KEY": planted, "MY_TOKEN": "hunter2-long-value", "SHORT": "abc"}
    redactor = Redactor(secrets=["repo-secret-xyz"], env_names=["MY_TOKEN", "SHORT"], environ=env)
    record: dict[str, Any] = {
        "messages": [{"role": "user", "content": f"key is {planted}!"},
                     {"role": "tool", "content": ("env: MY_TOKEN=hunter2-long-value abc",)}],
        "headers": {"Authorization": "Bearer tok_QWERTY123456", "n": 3},
        planted: "as a key",
        "notes": ["AKIAABCDEFGHIJKLMNOP", "ghp_" + "x" * 36, "repo-secret-xyz",
                  "git clone https://user:tok3n@example.com/r.git", "sk-" + "Z" * 20,
                  "task-abcdefghijklmnopqrstuvw stays", None, 1.5],
    }
    out = redactor.redact_obj(record)
    text = json.dumps(out)
    for secret in (planted, "hunter2-long-value", "QWERTY123456", "AKIAABCDEFGHIJKLMNOP",
                   "ghp_", "repo-secret-xyz", "tok3n", "Z" * 20):
        assert secret not in text
    assert out["messages"][0]["content"] == "key is [REDACTED:OPENROUTER_API_KEY]!"
    assert out["messages"][1]["content"] == ("env: MY_TOKEN=[REDACTED:MY_TOKEN] abc",)
    assert out["headers"] == {"Authorization": "Bearer [REDACTED]", "n": 3}
    assert "[REDACTED:OPENROUTER_API_KEY]" in out
    assert out["notes"][3] == "git clone https://[REDACTED]@example.com/r.git"
    assert out["notes"][5:] == ["task-abcdefghijklmnopqrstuvw stays", None, 1.5]
    assert record["notes"][2] == "repo-secret-xyz"  # the input is not modified


def test_redaction_is_fast_enough_for_every_line() -> None:
    redactor = Redactor(secrets=[f"secret-value-{i:04d}" for i in range(200)], environ={})
    line = "ordinary log line with some words and numbers 12345 " * 4
    started = time.perf_counter()
    for _ in range(5000):
        redactor.redact(line)
    assert time.perf_counter() - started < 2.0
