"""The llm_v0 agent loop's stop conditions and budgets (max steps, stuck, rejected patches,
cost, tokens, wall time, the same failing call again and again), against the fake server and
toolbox of tests/support/llm_agent_runs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentbench.schemas.taxonomy import Reason
from tests.fakes.openai_server import (
    FakeOpenAIServer,
    Reply,
    Slow,
    Step,
    bad_arguments,
    tool_reply,
)
from tests.support.fake_toolbox import (
    BUGGY,
    FAILING,
    FIX,
)
from tests.support.llm_agent_runs import (
    SOLVE,
    make_agent_and_ctx,
    run_agent,
)


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
