"""The model gateway (issue 23 item 1) speaks the agents' protocols: OpenAI Chat Completions
and Anthropic Messages, each with and without streaming, through httpx as an agent's SDK would,
forwarded to the loopback fake OpenAI server through the model client, with every call recorded
as llm_v0 records its own."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import Reply, tool_reply
from tests.support.gateways import EVALUATED, KEY, running_gateway, sse_data

USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150, "cost": 0.002}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}}]


def test_openai_chat_through_the_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 23 item 1: a chat call answered by the evaluated model, whatever model the agent
    named; its key stays on the host; sampling per the policy; recorded like llm_v0's calls."""
    steps = [tool_reply("bash", {"command": "ls"}, usage=USAGE), Reply(content="all done")]
    with running_gateway(tmp_path, monkeypatch, steps) as rig:
        first = rig.post("/v1/chat/completions", {
            "model": "gpt-4o", "messages": [{"role": "user", "content": "fix it"}],
            "tools": TOOLS, "temperature": 0.9, "seed": 7, "logprobs": True})
        assert first.status_code == 200, first.text
        message = first.json()["choices"][0]["message"]
        assert message["tool_calls"][0]["function"] == {"name": "bash",
                                                        "arguments": '{"command": "ls"}'}
        assert first.json()["choices"][0]["finish_reason"] == "tool_calls"
        history = [{"role": "user", "content": "fix it"}, message,
                   {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"],
                    "content": "a.py"}]
        second = rig.post("/v1/chat/completions", {"model": "claude-x", "messages": history})
        assert second.json()["choices"][0]["message"]["content"] == "all done"
        sent = [r.json for r in rig.upstream.requests]
        usage = rig.gateway.usage
    assert [s["model"] for s in sent] == [EVALUATED, EVALUATED]
    assert sent[0]["temperature"] == 0.0 and sent[0]["seed"] == 7  # the variant's, the agent's
    assert "logprobs" not in sent[0] and sent[0]["tools"] == TOOLS
    assert rig.upstream.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert rig.gateway.requested_models == ["gpt-4o", "claude-x"]
    assert (usage.llm_calls, usage.prompt_tokens, usage.total_tokens) == (2, 130, 165)
    assert usage.cost_usd == pytest.approx(0.002)
    assert rig.kinds() == ["note:gateway_request", "llm_request", "llm_response"] * 2
    note, request, response = rig.events.emitted[:3]
    assert note["data"]["requested_model"] == "gpt-4o"
    assert note["data"]["dropped"] == ["temperature"] and note["data"]["ignored"] == ["logprobs"]
    assert request["model"] == EVALUATED and request["step"] == 1 and request["messages"] == 1
    assert response["tool_calls"] == ["bash"] and response["prompt_tokens"] == 120
    calls = [json.loads(line) for line in (rig.artifacts / "model_calls.jsonl").open()]
    assert [c["prefix"] for c in calls] == [0, 1] and len(calls[1]["messages"]) == 2
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or KEY not in path.read_text(errors="replace"), path


def test_openai_chat_streaming(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 23 item 1: `stream: true` gets chat.completion.chunk events, the usage chunk when
    asked for, and [DONE]."""
    steps = [Reply(content="streamed text", tool_calls=[{"name": "bash",
                                                          "arguments": {"command": "pwd"}}])]
    with running_gateway(tmp_path, monkeypatch, steps) as rig:
        response = rig.post("/v1/chat/completions", {
            "model": "x", "messages": [{"role": "user", "content": "go"}], "stream": True,
            "stream_options": {"include_usage": True}, "tools": TOOLS})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_data(response)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == "streamed text"
    calls = [tc for d in deltas for tc in d.get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "bash" and calls[0]["index"] == 0
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
    assert chunks[-1]["usage"] == {"prompt_tokens": 10, "completion_tokens": 5,
                                   "total_tokens": 15}


def test_anthropic_messages_through_the_gateway(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 23 item 1: an Anthropic Messages conversation (system, tool_use, tool_result,
    tools, tool_choice) reaches the model as chat and its reply comes back as content blocks."""
    steps = [tool_reply("bash", {"command": "pytest"}, usage=USAGE)]
    body = {
        "model": "claude-sonnet-4-5", "max_tokens": 1024, "top_k": 5,
        "system": [{"type": "text", "text": "You fix bugs."}],
        "tools": [{"name": "bash", "description": "run", "input_schema": {"type": "object"}},
                  {"type": "web_search_20250305", "name": "web_search"}],
        "tool_choice": {"type": "any"},
        "messages": [
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"},
                {"type": "text", "text": "go on"}]}]}
    with running_gateway(tmp_path, monkeypatch, steps) as rig:
        response = rig.post("/v1/messages", body, header="x-api-key")
        sent = rig.upstream.requests[0].json
        note = rig.events.emitted[0]
    assert response.status_code == 200, response.text
    reply = response.json()
    assert reply["type"] == "message" and reply["stop_reason"] == "tool_use"
    assert reply["content"] == [{"type": "tool_use", "id": reply["content"][0]["id"],
                                 "name": "bash", "input": {"command": "pytest"}}]
    assert reply["usage"] == {"input_tokens": 120, "output_tokens": 30}
    assert sent["model"] == EVALUATED and sent["tool_choice"] == "required"
    assert sent["messages"] == [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "a.py"},
        {"role": "user", "content": "go on"}]
    assert [t["function"]["name"] for t in sent["tools"]] == ["bash"]
    assert note["data"]["protocol"] == "anthropic_messages"
    assert note["data"]["ignored"] == ["top_k", "server tool web_search_20250305"]


def test_anthropic_messages_streaming(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 23 item 1: Anthropic's event sequence, text and tool_use blocks rebuilt whole."""
    steps = [Reply(content="On it.", tool_calls=[{"name": "bash",
                                                   "arguments": {"command": "ls"}}])]
    with running_gateway(tmp_path, monkeypatch, steps) as rig:
        response = rig.post("/v1/messages", {
            "model": "claude", "max_tokens": 100, "stream": True,
            "messages": [{"role": "user", "content": "hi"}]})
    names = [line[len("event: "):] for line in response.text.splitlines()
             if line.startswith("event: ")]
    assert names == ["message_start", "content_block_start", "content_block_delta",
                     "content_block_stop", "content_block_start", "content_block_delta",
                     "content_block_stop", "message_delta", "message_stop"]
    data = sse_data(response)
    assert data[2]["delta"] == {"type": "text_delta", "text": "On it."}
    assert json.loads(data[5]["delta"]["partial_json"]) == {"command": "ls"}
    assert data[7]["delta"]["stop_reason"] == "tool_use" and data[7]["usage"]["output_tokens"] == 5


def test_a_kept_alive_connection_gets_no_delayed_ack_stall(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 23 item 1 (the gateway's added latency): headers and body went out as two writes,
    so on a kept-alive connection each answer waited ~40 ms for the client's delayed ACK (47 ms
    median added per call, against ~1-3 ms with TCP_NODELAY)."""
    import statistics

    with running_gateway(tmp_path, monkeypatch, []) as rig:
        rig.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "warm"}]})
        times = []
        for _ in range(15):
            started = time.perf_counter()
            rig.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
            times.append(time.perf_counter() - started)
    assert statistics.median(times) < 0.030, times
