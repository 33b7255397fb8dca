"""The model gateway speaks the OpenAI Responses API (issue 23 item 1): input items, instructions
and function tools reach the model as chat; its reply comes back as output items, as one body or
as the Responses server-sent events; budgets and records as for chat. Raw httpx, as an agent's
HTTP client; `test_the_openai_sdk_...` drives it with the official `openai` package when
installed (`uv run --with openai pytest ...`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.openai_server import Reply, tool_reply
from tests.support.gateways import EVALUATED, KEY, running_gateway, sse_data

USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150, "cost": 0.002}
TOOL = {"type": "function", "name": "shell", "description": "run a command", "strict": False,
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}


def test_a_responses_conversation_reaches_the_model_as_chat(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = [tool_reply("shell", {"command": "ls"}, usage=USAGE),
             Reply(content="Fixed.", usage=USAGE)]
    with running_gateway(tmp_path, monkeypatch, steps) as rig:
        first = rig.post("/v1/responses", {
            "model": "gpt-5-codex", "instructions": "You fix bugs.", "input": "fix it",
            "tools": [TOOL, {"type": "web_search"}], "tool_choice": "auto",
            "max_output_tokens": 500, "reasoning": {"effort": "low"}, "store": False})
        assert first.status_code == 200, first.text
        out = first.json()
        (call,) = out["output"]
        assert call["type"] == "function_call" and call["name"] == "shell"
        assert json.loads(call["arguments"]) == {"command": "ls"}
        assert out["usage"]["input_tokens"] == 120 and out["usage"]["output_tokens"] == 30
        assert out["object"] == "response" and out["status"] == "completed"
        second = rig.post("/v1/responses", {
            "model": "gpt-5-codex", "instructions": "You fix bugs.", "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
                {"type": "reasoning", "summary": []},
                call,
                {"type": "function_call_output", "call_id": call["call_id"],
                 "output": "a.py"},
                {"type": "message", "role": "developer", "content": "be brief"}]})
        assert second.status_code == 200, second.text
        (message,) = second.json()["output"]
        sent = [r.json for r in rig.upstream.requests]
        notes = [e for e in rig.events.emitted if e.get("kind") == "gateway_request"]
        usage = rig.gateway.usage
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["content"][0] == {"type": "output_text", "text": "Fixed.",
                                     "annotations": [], "logprobs": []}
    assert sent[0]["model"] == EVALUATED and sent[0]["max_tokens"] == 4096  # the variant's
    assert sent[0]["messages"] == [{"role": "system", "content": "You fix bugs."},
                                   {"role": "user", "content": "fix it"}]
    assert sent[0]["tools"] == [{"type": "function", "function": {
        "name": "shell", "parameters": TOOL["parameters"], "description": "run a command",
        "strict": False}}]
    assert sent[0]["tool_choice"] == "auto"
    assert sent[1]["messages"][1:] == [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": call["call_id"], "type": "function",
            "function": {"name": "shell", "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["call_id"], "content": "a.py"},
        {"role": "system", "content": "be brief"}]
    assert notes[0]["data"]["protocol"] == "openai_responses"
    assert notes[0]["data"]["ignored"] == ["reasoning", "store", "tool web_search"]
    assert notes[0]["data"]["dropped"] == ["max_tokens"]
    assert notes[1]["data"]["ignored"] == ["reasoning item"]
    assert (usage.llm_calls, usage.prompt_tokens) == (2, 240)
    assert rig.upstream.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_responses_streaming_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = [Reply(content="On it.", tool_calls=[{"name": "shell",
                                                   "arguments": {"command": "pwd"}}])]
    with running_gateway(tmp_path, monkeypatch, steps) as rig:
        response = rig.post("/v1/responses", {"model": "x", "input": "go", "stream": True,
                                              "tools": [TOOL]})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    names = [line[len("event: "):] for line in response.text.splitlines()
             if line.startswith("event: ")]
    assert names == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.completed"]
    data = sse_data(response)
    assert [d["type"] for d in data] == names
    assert [d["sequence_number"] for d in data] == list(range(len(names)))
    assert data[4]["delta"] == "On it."
    assert json.loads(data[9]["delta"]) == {"command": "pwd"}
    assert data[8]["item"]["call_id"] == data[11]["item"]["call_id"]
    final = data[-1]["response"]
    assert [i["type"] for i in final["output"]] == ["message", "function_call"]
    assert final["usage"]["output_tokens"] == 5 and final["status"] == "completed"


@pytest.mark.parametrize(("body", "says"), [
    ({"input": []}, "input: required"),
    ({"input": [{"type": "function_call_output", "output": "x"}]},
     "input[0]: a function_call_output without a call_id"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role: expected one of"),
    ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id: the gateway"),
    ({"input": "x", "tool_choice": {"type": "file_search"}}, "tool_choice: expected"),
    ({"input": "x", "max_output_tokens": "9"}, "max_output_tokens: expected an integer"),
])
def test_a_bad_responses_request_is_one_line_and_not_forwarded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: dict[str, object],
        says: str) -> None:
    with running_gateway(tmp_path, monkeypatch, []) as rig:
        response = rig.post("/v1/responses", body)
        forwarded = len(rig.upstream.requests)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and says in error["message"], error
    assert "\n" not in error["message"] and forwarded == 0


def test_a_responses_budget_refuses_before_the_upstream(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with running_gateway(tmp_path, monkeypatch, [Reply("one"), Reply("two")],
                         budgets={"max_steps": 1}) as rig:
        assert rig.post("/v1/responses", {"input": "a"}).status_code == 200
        refused = rig.post("/v1/responses", {"input": "b"})
        forwarded = len(rig.upstream.requests)
        stop = rig.gateway.stop
    assert refused.status_code == 403 and forwarded == 1
    assert refused.json()["error"]["code"] == "budget_exhausted"
    assert stop is not None and stop.sub_reason == "BUDGET_STEPS"


def test_the_openai_sdk_talks_to_the_gateway(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The official client, as Codex-like agents use it: responses.create with tools, a
    function_call_output turn, and responses.stream's events and final response."""
    openai = pytest.importorskip("openai")
    steps = [tool_reply("shell", {"command": "ls"}), Reply(content="Done."),
             Reply(content="Streamed.")]
    with running_gateway(tmp_path, monkeypatch, steps) as rig:
        client = openai.OpenAI(base_url=rig.gateway.openai_base_url, api_key=rig.gateway.token,
                               max_retries=0)
        first = client.responses.create(model="gpt-5", input="fix it", tools=[TOOL])
        (call,) = [item for item in first.output if item.type == "function_call"]
        assert call.name == "shell" and json.loads(call.arguments) == {"command": "ls"}
        second = client.responses.create(model="gpt-5", input=[
            {"role": "user", "content": "fix it"}, call.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": call.call_id, "output": "a.py"}])
        assert second.output_text == "Done." and second.usage is not None
        with client.responses.stream(model="gpt-5", input="again") as events:
            deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
            final = events.get_final_response()
        assert deltas == ["Streamed."] and final.output_text == "Streamed."
        with pytest.raises(openai.PermissionDeniedError):
            openai.OpenAI(base_url=rig.gateway.openai_base_url, api_key="not-the-token",
                          max_retries=0).responses.create(model="gpt-5", input="x")
        client.close()
    assert rig.gateway.usage.llm_calls == 3
