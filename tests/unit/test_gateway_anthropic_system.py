"""Claude Code 2.1 sends a `system` message inside Anthropic `messages` (its environment, after
the first user message) besides the top-level `system`: the gateway forwards it as a chat system
message in place, and still refuses any other role with one line naming the message."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentbench.gateway import anthropic
from pytest_agentbench.gateway.request import BadRequest
from tests.fakes.openai_server import Reply
from tests.support.gateways import running_gateway


def test_a_system_message_among_the_messages_is_forwarded_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with running_gateway(tmp_path, monkeypatch, [Reply(content="ok")]) as rig:
        answer = rig.post("/v1/messages", {
            "model": "claude-sonnet-4-5", "max_tokens": 100, "system": "You are Claude Code.",
            "messages": [
                {"role": "user", "content": "fix the bug"},
                {"role": "system", "content": [{"type": "text", "text": "# Environment"},
                                               {"type": "text", "text": "cwd: /ws"}]},
                {"role": "assistant", "content": "looking"},
                {"role": "user", "content": "go on"}]}, header="x-api-key")
        assert answer.status_code == 200, answer.text
        assert answer.json()["content"][0]["text"] == "ok"
        sent = rig.upstream.requests[0].json["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("system", "You are Claude Code."), ("user", "fix the bug"),
        ("system", "# Environment\ncwd: /ws"), ("assistant", "looking"), ("user", "go on")]


def test_another_role_is_refused_naming_the_message() -> None:
    with pytest.raises(BadRequest, match=r"messages\[1\]: expected an object with role user, "
                                         r"assistant or system"):
        anthropic.parse({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "a"}, {"role": "tool", "content": "b"}]})
