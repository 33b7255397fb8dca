"""llm_v0 does not take `finish` at its word, and answers code written in prose with a nudge.

Against the real loopback server (tests/fakes/openai_server.py) and the fake toolbox of
tests/support/fake_toolbox.py, whose `run` passes only once mathx.py is fixed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.agents.llm_config import load_prompt
from pytest_agentbench.agents.port import AgentContext
from pytest_agentbench.schemas.taxonomy import AGENT_SUB_REASONS, Reason, blame
from tests.fakes.openai_server import FakeOpenAIServer, Reply, Step, json_in_content, tool_reply
from tests.support.fake_toolbox import BUGGY, FAILING, FIX, FIXED
from tests.support.llm_agent_runs import (
    conversation,
    make_agent_and_ctx,
    run_agent,
)

FINISH = tool_reply("finish", {"summary": "the test passed"})
PATCH = tool_reply("apply_patch", {"unified_diff": FIX})
PROSE_CODE = Reply(content="The fix is:\n```python\ndef mean(xs):\n    return sum(xs) / len(xs)\n"
                           "```\nThis makes the test pass.")


def notes(ctx: AgentContext, kind: str) -> list[dict[str, Any]]:
    return [e for e in ctx.events.of_type("note") if e["kind"] == kind]  # type: ignore[attr-defined]


def tools_called(ctx: AgentContext) -> list[tuple[str, dict[str, Any]]]:
    return ctx.toolbox.calls  # type: ignore[attr-defined,no-any-return]


def last_message(srv: FakeOpenAIServer, request: int) -> dict[str, Any]:
    return srv.requests[request].json["messages"][-1]  # type: ignore[no-any-return]


# -- finish is checked ---------------------------------------------------------------------------
def test_unverified_finish_is_refused_then_a_fix_is_verified(tmp_path: Path) -> None:
    outcome, srv, ctx = run_agent(tmp_path, [FINISH, PATCH, FINISH])

    assert (outcome.finished_by, outcome.reason, outcome.steps) == ("finish", None, 3)
    assert (tmp_path / "work" / "mathx.py").read_text() == FIXED
    # the harness ran the failing command after each finish, through the (recording) toolbox
    assert tools_called(ctx) == [
        ("finish", {"summary": "the test passed"}),
        ("run", {"command": FAILING, "timeout_sec": pytest.approx(59, abs=1)}),
        ("apply_patch", {"unified_diff": FIX}),
        ("finish", {"summary": "the test passed"}),
        ("run", {"command": FAILING, "timeout_sec": pytest.approx(59, abs=1)}),
    ]
    refusal = last_message(srv, 1)
    assert refusal["role"] == "tool" and refusal["content"].startswith("finish refused")
    assert "FAILED tests/test_mathx.py::test_mean" in refusal["content"]  # the output's tail
    assert "exit_code: 1" in refusal["content"] and FAILING in refusal["content"]
    assert "1 more finish(es)" in refusal["content"] and "apply_patch" in refusal["content"]
    [refused] = notes(ctx, "finish_refused")
    assert refused["data"]["refusals"] == 1 and refused["data"]["final"] is False
    assert refused["data"]["exit_code"] == 1 and refused["actor"] == "agent"
    [verified] = notes(ctx, "finish_verified")
    assert verified["data"]["by"] == "verify_run"
    lines = conversation(ctx)
    assert any("finish refused" in str(ln.get("message", {}).get("content")) for ln in lines)
    assert lines[-1]["stop"]["finished_by"] == "finish"


def test_finish_refused_past_the_bound_ends_the_run(tmp_path: Path) -> None:
    # stuck_after=2: the harness's own check runs must not count as the model's test runs
    outcome, srv, ctx = run_agent(tmp_path, [FINISH] * 5, stuck_after=2)

    assert (outcome.finished_by, outcome.reason, outcome.sub_reason) == (
        "unverified_finish", Reason.AGENT_GAVE_UP, "UNVERIFIED_FINISH")
    assert len(srv.requests) == 3 and outcome.steps == 3  # refused twice, the third ends it
    assert "finish called 3 times" in outcome.summary and FAILING in outcome.summary
    assert "The next finish while it fails ends the run." in last_message(srv, 2)["content"]
    refused = notes(ctx, "finish_refused")
    assert [n["data"]["final"] for n in refused] == [False, False, True]
    stop = notes(ctx, "agent_stop")[-1]
    assert stop["data"]["sub_reason"] == "UNVERIFIED_FINISH"
    assert [c[0] for c in tools_called(ctx)] == ["finish", "run"] * 3
    last = conversation(ctx)[-1]["stop"]
    assert (last["reason"], last["sub_reason"]) == ("AGENT_GAVE_UP", "UNVERIFIED_FINISH")


def test_the_bound_is_a_param(tmp_path: Path) -> None:
    outcome, srv, _ = run_agent(tmp_path, [FINISH] * 3, max_unverified_finish=0)
    assert outcome.sub_reason == "UNVERIFIED_FINISH" and len(srv.requests) == 1


def test_the_models_own_passing_run_is_check_enough(tmp_path: Path) -> None:
    steps: list[Step] = [PATCH, tool_reply("run", {"command": f"  {FAILING} "}), FINISH]
    outcome, _, ctx = run_agent(tmp_path, steps)
    assert outcome.finished_by == "finish"
    assert [c[0] for c in tools_called(ctx)] == ["apply_patch", "run", "finish"]  # no extra run
    [verified] = notes(ctx, "finish_verified")
    assert verified["data"]["by"] == "model_run"


def test_an_edit_after_the_passing_run_is_checked_again(tmp_path: Path) -> None:
    undo = tool_reply("write_file", {"path": "mathx.py", "content": BUGGY})
    steps: list[Step] = [PATCH, tool_reply("run", {"command": FAILING}), undo, FINISH, PATCH,
                         FINISH]
    outcome, _, ctx = run_agent(tmp_path, steps)
    assert outcome.finished_by == "finish"
    assert len(notes(ctx, "finish_refused")) == 1
    assert [n["data"]["by"] for n in notes(ctx, "finish_verified")] == ["verify_run"]


def test_a_passing_run_of_another_command_is_not_the_check(tmp_path: Path) -> None:
    steps: list[Step] = [tool_reply("run", {"command": f"{FAILING} || true"}), FINISH]
    with FakeOpenAIServer(steps, default=tool_reply("read_file", {"path": "mathx.py"})) as srv:
        agent, ctx = make_agent_and_ctx(tmp_path, srv.base_url, max_unverified_finish=0)
        ctx.toolbox.grade = lambda root: (  # type: ignore[attr-defined]
            (0, "ok\n") if len(ctx.toolbox.calls) == 1 else (1, "1 failed\n"))  # type: ignore[attr-defined]
        outcome = agent.run(ctx)
    assert outcome.sub_reason == "UNVERIFIED_FINISH"


def test_verification_can_be_turned_off(tmp_path: Path) -> None:
    outcome, _, ctx = run_agent(tmp_path, [FINISH], verify_finish=False)
    assert (outcome.finished_by, outcome.reason) == ("finish", None)
    assert [c[0] for c in tools_called(ctx)] == ["finish"]
    assert notes(ctx, "finish_refused") == notes(ctx, "finish_verified") == []


def test_without_time_left_the_finish_stands_unchecked(tmp_path: Path) -> None:
    with FakeOpenAIServer([FINISH]) as srv:
        agent, ctx = make_agent_and_ctx(tmp_path, srv.base_url)
        ctx.deadline = time.monotonic() + 1.8  # > 1 s to call the model, < MIN_VERIFY_SEC after
        outcome = agent.run(ctx)
    assert outcome.finished_by == "finish"
    assert [c[0] for c in tools_called(ctx)] == ["finish"]
    [unverified] = notes(ctx, "finish_unverified")
    assert unverified["data"]["remaining_sec"] < 2.0


def test_unverified_finish_is_a_documented_agent_sub_reason() -> None:
    assert AGENT_SUB_REASONS["UNVERIFIED_FINISH"] == Reason.AGENT_GAVE_UP
    assert blame(AGENT_SUB_REASONS["UNVERIFIED_FINISH"]) == "agent"


# -- code written in prose -----------------------------------------------------------------------
def test_code_in_prose_gets_one_nudge_then_the_model_recovers(tmp_path: Path) -> None:
    outcome, srv, ctx = run_agent(tmp_path, [PROSE_CODE, PATCH, FINISH])

    assert (outcome.finished_by, outcome.reason) == ("finish", None)
    assert (tmp_path / "work" / "mathx.py").read_text() == FIXED
    nudge = last_message(srv, 1)
    assert nudge["role"] == "user" and "code in a code block but no tool call" in nudge["content"]
    assert "apply_patch" in nudge["content"] and "write_file" in nudge["content"]
    [note] = notes(ctx, "prose_code_nudge")
    assert note["data"] == {"step": 1, "code_blocks": 1, "languages": ["python"], "diff": False}
    said = [ln["message"]["content"] for ln in conversation(ctx) if "message" in ln]
    assert any("code in a code block" in str(text) for text in said)


def test_the_second_prose_answer_gets_the_plain_nudge(tmp_path: Path) -> None:
    outcome, srv, ctx = run_agent(tmp_path, [PROSE_CODE, PROSE_CODE, PATCH, FINISH])
    assert outcome.finished_by == "finish"
    assert "code in a code block" in last_message(srv, 1)["content"]
    second = last_message(srv, 2)["content"]
    assert "no tool call" in second and "code in a code block" not in second
    assert len(notes(ctx, "prose_code_nudge")) == 1


def test_prose_answers_still_end_in_no_progress(tmp_path: Path) -> None:
    outcome, srv, _ = run_agent(tmp_path, [PROSE_CODE] * 5)
    assert (outcome.finished_by, outcome.reason) == ("no_progress", Reason.AGENT_NO_PROGRESS)
    assert len(srv.requests) == 3  # max_noop=3, as before


def test_a_diff_in_prose_is_pointed_at_apply_patch(tmp_path: Path) -> None:
    diff = Reply(content=f"Apply this:\n```diff\n{FIX}```")
    outcome, srv, ctx = run_agent(tmp_path, [diff, PATCH, FINISH])
    assert outcome.finished_by == "finish"
    assert "`unified_diff` argument of apply_patch" in last_message(srv, 1)["content"]
    assert notes(ctx, "prose_code_nudge")[0]["data"]["diff"] is True


def test_no_code_nudge_for_plain_prose_json_calls_or_when_off(tmp_path: Path) -> None:
    fenced_call = json_in_content("apply_patch", {"unified_diff": FIX}, fenced=True)
    outcome, srv, ctx = run_agent(tmp_path, [Reply(content="Thinking."), fenced_call, FINISH])
    assert outcome.finished_by == "finish" and notes(ctx, "prose_code_nudge") == []
    assert "no tool call" in last_message(srv, 1)["content"]
    outcome, srv, ctx = run_agent(tmp_path / "off", [PROSE_CODE, PATCH, FINISH],
                                  prose_code_nudge=False)
    assert outcome.finished_by == "finish" and notes(ctx, "prose_code_nudge") == []
    assert "code in a code block" not in last_message(srv, 1)["content"]


# -- the prompt that says so ---------------------------------------------------------------------
def test_prompt_v2_tells_the_model_and_v1_is_unchanged(tmp_path: Path) -> None:
    v1, v2 = load_prompt("system_v1")[0], load_prompt("system_v2")[0]
    assert v2.startswith(v1.split("\nCall tools")[0]) and "finish is refused" in v2
    assert "refused" not in v1
    outcome, srv, _ = run_agent(tmp_path, [PATCH, FINISH], prompt="system_v2")
    assert outcome.finished_by == "finish" and outcome.model is not None
    assert (outcome.model.prompt_version or "").startswith("system_v2@sha256:")
    assert srv.requests[0].json["messages"][0]["content"] == v2


def test_a_sandbox_lost_during_a_tool_call_keeps_what_the_model_calls_cost(
    tmp_path: Path,
) -> None:
    """Cold review: a SandboxError from a tool (the engine lost during the finish check, say)
    left the record without usage, so a variant looked cheaper than it was."""
    from pytest_agentbench.agents.port import spend_of
    from pytest_agentbench.sandbox.port import SandboxError

    with FakeOpenAIServer([PATCH, FINISH]) as srv:
        agent, ctx = make_agent_and_ctx(tmp_path, srv.base_url)
        real_call = ctx.toolbox.call

        def engine_gone_on_run(name: str, arguments: dict[str, Any]) -> Any:
            if name == "run":
                raise SandboxError("the engine does not answer")
            return real_call(name, arguments)

        ctx.toolbox.call = engine_gone_on_run  # type: ignore[method-assign]
        with pytest.raises(SandboxError) as lost:
            agent.run(ctx)
    usage, model = spend_of(lost.value)
    assert usage is not None and usage.llm_calls == 2 and usage.total_tokens == 30
    assert model is not None and model.name
