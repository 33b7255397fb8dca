"""llm_v0's finish check and prose-code nudge end to end: pytest → Docker → a loopback server.

The server answers by role and content (not by position): a first observation gets a premature
`finish`, a refused finish gets the oracle patch, a patched file gets `finish` again. Its usage is
not a constant: prompt tokens are the request's messages and tools in JSON over
`CHARS_PER_TOKEN` (4, the agent's own estimate), completion tokens the reply's message over 4, so
the record's token counts follow what llm_v0 really sends on the bundled task.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from pytest_agentbench.agents.llm_v0 import CHARS_PER_TOKEN
from tests.e2e.test_llm_e2e import TASK, TASK_DIR, only_record, run_pytest
from tests.fakes.openai_server import FakeOpenAIServer, Reply, json_in_content, tool_reply

TEST_COMMAND = "python -m pytest -q -p no:cacheprovider tests/test_mathx.py"
PROSE_FIX = ("Here is the fixed function:\n```python\ndef mean(values):\n"
             "    return sum(values) / len(values)\n```\nThe test passed.")


def with_usage(reply: Reply, request: dict[str, Any]) -> Reply:
    """The reply, with usage estimated from the request and the reply (see the module doc)."""
    prompt = len(json.dumps(request.get("messages", [])) + json.dumps(request.get("tools", [])))
    body = reply.body(0)["choices"][0]["message"]
    prompt_tokens = prompt // CHARS_PER_TOKEN
    completion_tokens = max(1, len(json.dumps(body)) // CHARS_PER_TOKEN)
    reply.usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                   "total_tokens": prompt_tokens + completion_tokens}
    return reply


def responder(native: bool, prose_first: bool = False) -> Any:
    patch = (TASK_DIR / "oracle.patch").read_text()
    call = tool_reply if native else (lambda name, args: json_in_content(name, args))

    def answer(request: dict[str, Any]) -> Reply:
        messages = request["messages"]
        last, text = messages[-1], str(messages[-1].get("content") or "")
        if len(messages) == 2:  # the first observation: claim success without doing anything
            reply = (Reply(content=PROSE_FIX) if prose_first
                     else call("finish", {"summary": "the test passed"}))
        elif "finish refused" in text or "code in a code block" in text:
            reply = call("apply_patch", {"unified_diff": patch})
        elif "minilib/mathx.py" in text:  # the patch went in
            reply = call("finish", {"summary": "mean divides by len(values)"})
        else:
            reply = Reply(content=f"unexpected {last.get('role')}: {text[:200]}")
        return with_usage(reply, request)

    return answer


def events_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def test_unverified_finish_is_refused_then_the_fix_passes(tmp_path: Path) -> None:
    with FakeOpenAIServer([], default=responder(native=True)) as server:
        proc = run_pytest(server.base_url, tmp_path)
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    run_dir, record = only_record(tmp_path)
    assert record["result"]["passed"] is True
    assert record["agent"]["finished_by"] == "finish" and record["usage"]["llm_calls"] == 3
    assert len(requests) == 3
    refusal = requests[1].json["messages"][-1]
    assert refusal["role"] == "tool" and refusal["content"].startswith("finish refused")
    assert "test_mean" in refusal["content"]  # the tail of the real pytest output

    events = events_of(run_dir)
    notes = [e for e in events if e["type"] == "note"]
    kinds = [n["kind"] for n in notes]
    assert kinds.count("finish_refused") == 1 and kinds.count("finish_verified") == 1
    refused = next(n for n in notes if n["kind"] == "finish_refused")
    assert refused["data"]["exit_code"] == 1 and refused["data"]["final"] is False
    assert next(n for n in notes if n["kind"] == "finish_verified")["data"]["by"] == "verify_run"
    tool_log = run_dir / "tasks" / TASK / "agent" / "tool_calls.jsonl"
    calls = [json.loads(line) for line in tool_log.read_text().splitlines()]
    assert [(c["tool"], c["arguments"].get("command")) for c in calls] == [
        ("finish", None), ("run", TEST_COMMAND), ("apply_patch", None), ("finish", None),
        ("run", TEST_COMMAND)]
    assert [c["result"]["exit_code"] for c in calls if c["tool"] == "run"] == [1, 0]
    conversation = (run_dir / "tasks" / TASK / "agent" / "conversation.jsonl").read_text()
    assert "finish refused" in conversation

    responses = [e for e in events if e["type"] == "llm_response"]
    per_call = [r["prompt_tokens"] + r["completion_tokens"] for r in responses]
    assert sum(per_call) == record["usage"]["total_tokens"]
    print(f"\nllm_v0 tokens per model call (fix-mean-off-by-one, refused finish then fix): "
          f"median {statistics.median(per_call):.0f}, calls {per_call}, "
          f"prompt {[r['prompt_tokens'] for r in responses]}")
    assert 300 < statistics.median(per_call) < 5000


def test_code_in_prose_is_nudged_then_applied_with_text_tool_calls(tmp_path: Path) -> None:
    with FakeOpenAIServer([], default=responder(native=False, prose_first=True)) as server:
        proc = run_pytest(server.base_url, tmp_path)
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    run_dir, record = only_record(tmp_path)
    assert record["result"]["passed"] is True and record["usage"]["llm_calls"] == 3
    nudge = requests[1].json["messages"][-1]
    assert nudge["role"] == "user" and "apply_patch" in nudge["content"]
    events = events_of(run_dir)
    kinds = [e["kind"] for e in events if e["type"] == "note"]
    assert kinds.count("prose_code_nudge") == 1 and kinds.count("finish_verified") == 1
    assert "finish_refused" not in kinds
    per_call = [e["prompt_tokens"] + e["completion_tokens"] for e in events
                if e["type"] == "llm_response"]
    print(f"\nllm_v0 tokens per model call (fix-mean-off-by-one, prose code, nudge, text calls): "
          f"median {statistics.median(per_call):.0f}, calls {per_call}")
