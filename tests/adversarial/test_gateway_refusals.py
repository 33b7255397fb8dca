"""Issue 23 item 1: the model gateway answers model calls of its own attempt only, and within
the attempt's budgets, checked before anything reaches the model. Each refusal is an HTTP error
with one line saying why; a spent budget, the task's time or a model that failed for good ends
the attempt with llm_v0's reason, and every later call is refused without reaching the model."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import Fault, Reply
from tests.support.gateways import running_gateway

CHAT = "/v1/chat/completions"
ASK = {"model": "any", "messages": [{"role": "user", "content": "fix it"}]}
USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120, "cost": 0.6}


def test_the_call_after_the_budget_is_refused_before_the_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 23 item 1: with max_steps 2, the third call never reaches the upstream; the
    attempt ends AGENT_GAVE_UP [BUDGET_STEPS] and stays ended."""
    with running_gateway(tmp_path, monkeypatch, [], budgets={"max_steps": 2}) as rig:
        answers = [rig.post(CHAT, ASK) for _ in range(4)]
        upstream_calls = len(rig.upstream.requests)
    assert [a.status_code for a in answers] == [200, 200, 403, 403]
    assert answers[2].json()["error"]["code"] == "budget_exhausted"
    assert "budget: model calls 2 of 2" in answers[2].json()["error"]["message"]
    assert answers[3].json()["error"]["code"] == "attempt_stopped"
    assert upstream_calls == 2
    stop = rig.gateway.stop
    assert stop is not None and (stop.reason, stop.sub_reason) == ("AGENT_GAVE_UP",
                                                                   "BUDGET_STEPS")
    assert rig.gateway.usage.llm_calls == 2
    assert rig.kinds().count("llm_request") == 2 and rig.kinds()[-1] == "note:gateway_stop"


@pytest.mark.parametrize(("budgets", "steps", "calls", "sub_reason"), [
    ({"max_tokens_total": 50}, [], 0, "BUDGET_TOKENS"),
    ({"max_cost_usd": 1.0}, [Reply(content="ok", usage=USAGE)], 1, "BUDGET_COST"),
])
def test_token_and_cost_budgets_hold_before_forwarding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budgets: dict[str, float],
        steps: list[Reply], calls: int, sub_reason: str) -> None:
    """issue 23 item 1: a call whose estimate (prompt + max_tokens) would pass the token budget,
    or a second $0.6 call under a $1 budget, is refused before it is sent."""
    with running_gateway(tmp_path, monkeypatch, list(steps), budgets=budgets) as rig:
        answers = [rig.post(CHAT, ASK) for _ in range(calls + 1)]
        upstream_calls = len(rig.upstream.requests)
    assert [a.status_code for a in answers] == [200] * calls + [403]
    assert upstream_calls == calls
    assert rig.gateway.stop is not None and rig.gateway.stop.sub_reason == sub_reason


def test_the_task_deadline_stops_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 23 item 1: under a second of task time left, no call is forwarded (TIMEOUT)."""
    with running_gateway(tmp_path, monkeypatch, [], task_sec=0.5) as rig:
        answer = rig.post("/v1/messages", {"model": "c", "max_tokens": 10,
                                           "messages": [{"role": "user", "content": "hi"}]})
        upstream_calls = len(rig.upstream.requests)
    assert answer.status_code == 403 and answer.json()["type"] == "error"
    assert upstream_calls == 0
    stop = rig.gateway.stop
    assert stop is not None and (stop.reason, stop.sub_reason) == ("TIMEOUT", "TASK_BUDGET")


def test_a_model_failure_ends_the_attempt_as_llm_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 23 item 1: the upstream refusing the key is a 502 to the agent and LLM_ERROR
    [AUTH] for the attempt; the agent's retry is refused at the gateway."""
    with running_gateway(tmp_path, monkeypatch, [Fault(401)]) as rig:
        first, retry = rig.post(CHAT, ASK), rig.post(CHAT, ASK)
        upstream_calls = len(rig.upstream.requests)
    assert (first.status_code, retry.status_code) == (502, 403)
    assert upstream_calls == 1
    stop = rig.gateway.stop
    assert stop is not None and (stop.reason, stop.sub_reason) == ("LLM_ERROR", "AUTH")
    assert "note:llm_error" in rig.kinds()


def test_only_this_attempts_token_and_only_model_calls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 23 item 1: no token, a wrong one or another attempt's gets 403 on every path (the
    paths are not probed); with the token, anything but a model call is 404 or 405; none of it
    reaches the model or counts as a call."""
    with running_gateway(tmp_path / "a", monkeypatch, []) as rig, \
            running_gateway(tmp_path / "b", monkeypatch, []) as other:
        url = rig.gateway.base_url
        refused = [
            rig.http.post(f"{url}{CHAT}", json=ASK),
            rig.post(CHAT, ASK, token="not-the-token"),
            rig.post(CHAT, ASK, token=other.gateway.token),
            rig.post("/v1/messages", ASK, token=other.gateway.token, header="x-api-key"),
            rig.post("/v1/embeddings", {"input": "x"}, token="nope"),
        ]
        missing = [rig.post(p, ASK) for p in ("/v1/embeddings", "/v1/models", "/", "/admin")]
        wrong_method = rig.http.get(f"{url}{CHAT}",
                                    headers={"authorization": f"Bearer {rig.gateway.token}"})
        bad_json = rig.http.post(f"{url}{CHAT}", content=b"{not json",
                                 headers={"authorization": f"Bearer {rig.gateway.token}"})
        no_messages = rig.post(CHAT, {"model": "x"})
        upstream_calls = len(rig.upstream.requests)
    assert [r.status_code for r in refused] == [403] * 5
    assert {r.json()["error"]["message"] for r in refused} == {
        "agentbench gateway: not this attempt's token"}
    assert [r.status_code for r in missing] == [404] * 4
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"
    assert (bad_json.status_code, no_messages.status_code) == (400, 400)
    assert "messages: required" in no_messages.json()["error"]["message"]
    assert upstream_calls == 0 and rig.gateway.usage.llm_calls == 0
    assert rig.events.emitted == [] and rig.gateway.stop is None


def test_the_gateway_listens_on_loopback_only(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 23 item 1: the server is bound to 127.0.0.1, and closing it frees the port."""
    import socket

    with running_gateway(tmp_path, monkeypatch, []) as rig:
        host, port = rig.gateway._httpd.server_address[:2]  # type: ignore[union-attr]
        assert host == "127.0.0.1"
    time.sleep(0.1)
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
