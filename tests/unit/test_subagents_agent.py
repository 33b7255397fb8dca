"""The subagents agent against a real OpenAI-compatible server on loopback that answers by role
(the system prompt) and content, and the fake toolbox over a temporary directory (tests/support/
fake_toolbox.py: edits by string replacement, `run` grades mathx.py), as for llm_v0."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.agents.port import AgentContext, AgentError, AgentOutcome
from pytest_agentbench.agents.subagents.agent import SubagentsAgent
from pytest_agentbench.agents.variants import Variant, VariantError, agent_builder, load_variant
from pytest_agentbench.core.event_sink import EventSink
from pytest_agentbench.schemas.events import EventAdapter
from pytest_agentbench.schemas.records import Usage
from pytest_agentbench.schemas.taxonomy import Reason
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.support.fake_toolbox import BUGGY, FAIL_OUT, FAILING, FIX, FIXED, TASK, DirToolbox

USAGE = {"router": (900, 40), "searcher": (1500, 120), "patcher": (2000, 200),
         "tester": (1100, 60)}


# -- a scripted team, answering by role and content -------------------------------------------
def role_of(request: dict[str, Any]) -> str:
    system = request["messages"][0]["content"]
    return next(r for r in USAGE if f"You are the {r}" in system)


def answer(name: str, args: dict[str, Any], role: str, native: bool) -> Reply:
    prompt, completion = USAGE[role]
    usage = {"prompt_tokens": prompt, "completion_tokens": completion,
             "total_tokens": prompt + completion, "cost": 0.001}
    if native:
        return Reply(tool_calls=[{"name": name, "arguments": args}], usage=usage)
    if name in ("delegate", "report_candidates", "propose_patch", "recommend"):
        return Reply(content=f"Here it is:\n```json\n{json.dumps(args)}\n```", usage=usage)
    return Reply(content=json.dumps({"name": name, "arguments": args}), usage=usage)


def team(native: bool = True, tester_lies: bool = False,
         router: Callable[[str], dict[str, Any]] | None = None) -> Callable[[Any], Reply]:
    """The scripted model: a router that follows the state, a searcher that searches once, a
    patcher that sends FIX (or nothing useful when `tester_lies`), a tester that runs, then
    says done."""

    def step(request: dict[str, Any]) -> Reply:
        role, messages = role_of(request), request["messages"]
        brief, last = messages[1]["content"], messages[-1]
        if role == "router":
            if router is not None:
                return answer("delegate", router(brief), role, native)
            nxt = ("searcher" if "Candidate files" not in brief
                   else "patcher" if "Last patch: applied" not in brief else "tester")
            return answer("delegate", {"next": nxt, "brief": f"please {nxt}"}, role, native)
        if role == "searcher":
            if len(messages) == 2:
                return answer("search", {"query": "def mean"}, role, native)
            return answer("report_candidates", {"candidates": [
                {"path": "mathx.py", "start_line": 1, "end_line": 2, "snippet": BUGGY,
                 "why": "divides by n - 1"}], "summary": "mean is in mathx.py"}, role, native)
        if role == "patcher":
            diff = FIX if not tester_lies else FIX.replace("len(xs)\n", "len(xs) + 0 \n")
            return answer("propose_patch", {"unified_diff": diff, "summary": "divide by n"},
                          role, native)
        ran = last["role"] == "tool" or "[run] result" in str(last.get("content"))
        if not ran:
            return answer("run", {"command": FAILING}, role, native)
        return answer("recommend", {"recommendation": "done", "reason": "it passes"}, role,
                      native)

    return step


def make_ctx(tmp_path: Path, params: dict[str, Any], max_steps: int = 30) -> AgentContext:
    work = tmp_path / "work"
    work.mkdir(parents=True, exist_ok=True)
    (work / "mathx.py").write_text(BUGGY)
    artifacts = tmp_path / "artifacts" / "agent"
    artifacts.mkdir(parents=True, exist_ok=True)
    events = EventSink(tmp_path / "artifacts" / "events.jsonl", "run-1", "fix-mean", "a-1")
    return AgentContext(task=TASK, task_dir=tmp_path, toolbox=DirToolbox(work), events=events,
                        failing_output=FAIL_OUT, failing_command=FAILING,
                        deadline=time.monotonic() + 60, max_steps=max_steps, params=params,
                        artifacts_dir=artifacts)


def run_team(tmp_path: Path, step: Callable[[Any], Any], *, budgets: dict[str, Any] | None = None,
             **params: Any) -> tuple[AgentOutcome, FakeOpenAIServer, AgentContext]:
    with FakeOpenAIServer([], default=step) as srv:
        model = {"preset": "local", "name": "fake/model-1", "base_url": srv.base_url,
                 "timeout_sec": 2.0, "max_retries": 1, "backoff_base_sec": 0.01,
                 "max_tokens": 256}
        variant = Variant("t", "subagents", params=params, model=model, budgets=budgets or {})
        agent = agent_builder(variant)()
        assert isinstance(agent, SubagentsAgent)
        ctx = make_ctx(tmp_path, variant.params)
        outcome = agent.run(ctx)
    return outcome, srv, ctx


def graph(ctx: AgentContext) -> list[dict[str, Any]]:
    assert ctx.artifacts_dir is not None
    data = json.loads((ctx.artifacts_dir / "delegation.json").read_text())
    assert data["version"] == 1 and data["agent"] == "subagents"
    return list(data["nodes"])


def assert_roles_sum_to_totals(usage: Usage | None) -> None:
    assert usage is not None and usage.by_role
    for field in ("llm_calls", "prompt_tokens", "completion_tokens", "total_tokens"):
        assert getattr(usage, field) == sum(getattr(r, field) for r in usage.by_role.values())
    assert usage.cost_usd == pytest.approx(sum(r.cost_usd or 0 for r in usage.by_role.values()))


# -- the happy paths --------------------------------------------------------------------------
@pytest.mark.parametrize("native", [True, False], ids=["native", "calls-as-text"])
def test_team_solves_and_records_graph_usage_and_conversation(tmp_path: Path,
                                                              native: bool) -> None:
    outcome, srv, ctx = run_team(tmp_path, team(native=native))

    assert (outcome.finished_by, outcome.reason) == ("finish", None), outcome.summary
    assert (tmp_path / "work" / "mathx.py").read_text() == FIXED
    tools = [name for name, _ in ctx.toolbox.calls]  # type: ignore[attr-defined]
    # searcher's search, the applied patch, the tester's run, the harness's own check, finish
    assert tools == ["search", "apply_patch", "run", "run", "finish"]

    nodes = graph(ctx)
    assert [(n["id"], n["parent"], n["role"], n["step"], n["status"]) for n in nodes] == [
        ("s1", None, "router", 1, "ok"), ("s2", "s1", "searcher", 1, "ok"),
        ("s3", None, "router", 2, "ok"), ("s4", "s3", "patcher", 2, "ok"),
        ("s5", None, "router", 3, "ok"), ("s6", "s5", "tester", 3, "ok")]
    assert [n["calls"] for n in nodes] == [1, 2, 1, 1, 1, 2]
    assert nodes[0]["summary"].startswith("delegate to searcher")
    assert nodes[1]["prompt_tokens"] == 2 * 1500 and nodes[5]["completion_tokens"] == 2 * 60

    usage = outcome.usage
    assert_roles_sum_to_totals(usage)
    assert usage is not None and outcome.steps == usage.llm_calls == 8 == len(srv.requests)
    assert {r: u.llm_calls for r, u in usage.by_role.items()} == {
        "router": 3, "searcher": 2, "patcher": 1, "tester": 2}
    assert usage.by_role["patcher"].prompt_tokens == 2000
    assert usage.fallback_tool_calls == (0 if native else 2)  # search and run written as text
    assert outcome.model is not None and outcome.model.prompt_version
    assert outcome.model.prompt_version.startswith("subagents@sha256:")

    # every request is its role's own conversation, with its own prompt and tools
    first = srv.requests[0].json
    assert "You are the router" in first["messages"][0]["content"]
    assert [t["function"]["name"] for t in first["tools"]] == ["delegate"]
    searcher = srv.requests[1].json
    assert {t["function"]["name"] for t in searcher["tools"]} == {
        "list_files", "read_file", "search", "report_candidates"}
    assert "please searcher" in searcher["messages"][1]["content"]
    patcher = srv.requests[4].json
    assert "Candidate files" in patcher["messages"][1]["content"]
    assert BUGGY.splitlines()[1] in patcher["messages"][1]["content"]  # snippets for the patcher

    assert ctx.artifacts_dir is not None
    lines = [json.loads(x) for x in
             (ctx.artifacts_dir / "conversation.jsonl").read_text().splitlines()]
    replies = [ln for ln in lines if ln.get("message", {}).get("role") == "assistant"]
    assert [ln["role"] for ln in replies] == [
        "router", "searcher", "searcher", "router", "patcher", "router", "tester", "tester"]
    assert all(ln["span"].startswith("s") for ln in replies)
    assert lines[-1]["stop"]["finished_by"] == "finish"

    events = ctx.events.emitted  # type: ignore[attr-defined]
    for event in events:
        EventAdapter.validate_python(event)
    types = [e["type"] for e in events]
    assert types.count("delegation_start") == types.count("delegation_end") == 6
    assert types.count("llm_request") == 8
    spans = {e["span_id"] for e in events if e["type"] == "llm_response"}
    assert spans == {"s1", "s2", "s3", "s4", "s5", "s6"}
    checks = [e for e in events if e["type"] == "note" and e["kind"] == "finish_check"]
    assert len(checks) == 1 and checks[0]["data"]["exit_code"] == 0


def test_the_testers_done_is_checked_and_refusals_are_bounded(tmp_path: Path) -> None:
    """The patch leaves the bug in; the tester says done anyway: refused twice, then a stop."""

    def lying(request: dict[str, Any]) -> Reply:
        if role_of(request) == "tester":
            return answer("recommend", {"recommendation": "done", "reason": "trust me"},
                          "tester", True)
        return team(native=True, tester_lies=True)(request)

    outcome, srv, ctx = run_team(tmp_path, lying, max_verify_failures=2)
    assert (outcome.finished_by, outcome.reason, outcome.sub_reason) == (
        "unverified_finish", Reason.AGENT_GAVE_UP, "UNVERIFIED_FINISH")
    tools = [name for name, _ in ctx.toolbox.calls]  # type: ignore[attr-defined]
    assert "finish" not in tools
    assert tools.count("run") == 2  # the harness's two checks, none by the tester
    # the router heard about the refusal
    router_briefs = [r.json["messages"][1]["content"] for r in srv.requests
                     if role_of(r.json) == "router"]
    assert any("was refused" in b and "exit code 1" in b for b in router_briefs)
    assert_roles_sum_to_totals(outcome.usage)
    assert graph(ctx)[-1]["role"] == "tester"


def test_a_routers_finish_is_checked_too(tmp_path: Path) -> None:
    outcome, _, ctx = run_team(
        tmp_path, team(router=lambda brief: {"next": "finish", "brief": "all good"}),
        max_verify_failures=1)
    assert (outcome.reason, outcome.sub_reason) == (Reason.AGENT_GAVE_UP, "UNVERIFIED_FINISH")
    assert [n for n, _ in ctx.toolbox.calls] == ["run"]  # type: ignore[attr-defined]


def test_router_give_up_and_unusable_router(tmp_path: Path) -> None:
    outcome, _, _ = run_team(tmp_path, team(router=lambda b: {"next": "give_up",
                                                              "brief": "impossible"}))
    assert (outcome.reason, outcome.sub_reason, outcome.summary) == (
        Reason.AGENT_GAVE_UP, "ROUTER_GAVE_UP", "impossible")

    outcome, srv, ctx = run_team(tmp_path / "2", team(router=lambda b: {"next": "dance"}),
                                 max_noop=2)
    assert outcome.reason == Reason.AGENT_NO_PROGRESS
    assert len(srv.requests) == 4  # two rounds, each a call and one reminder
    assert [n["status"] for n in graph(ctx)] == ["invalid", "invalid"]


# -- budgets ----------------------------------------------------------------------------------
def test_a_specialists_share_runs_out_and_the_router_is_told(tmp_path: Path) -> None:
    # the searcher's share (1%) of 100k tokens cannot hold one call (~256 completion + prompt)
    outcome, srv, ctx = run_team(
        tmp_path, team(), budgets={"max_tokens_total": 100_000}, max_noop=2,
        budget_shares={"searcher": 0.002, "router": 0.3, "patcher": 0.3, "tester": 0.2})
    assert outcome.reason == Reason.AGENT_NO_PROGRESS
    nodes = graph(ctx)
    assert nodes[1]["role"] == "searcher" and nodes[1]["status"] == "budget"
    assert nodes[1]["calls"] == 0 and "share 0.002" in nodes[1]["summary"]
    assert all(role_of(r.json) == "router" for r in srv.requests)
    second_round = srv.requests[1].json["messages"][1]["content"]
    assert "Out of budget (do not choose): searcher" in second_round
    assert outcome.usage is not None and "searcher" not in outcome.usage.by_role


def test_the_routers_share_stops_the_run(tmp_path: Path) -> None:
    outcome, srv, ctx = run_team(tmp_path, team(), budgets={"max_tokens_total": 100_000},
                                 budget_shares={"router": 0.001})
    assert (outcome.finished_by, outcome.reason, outcome.sub_reason) == (
        "budget", Reason.AGENT_GAVE_UP, "BUDGET_TOKENS")
    assert "router" in outcome.summary and srv.requests == []
    assert [n["status"] for n in graph(ctx)] == ["budget"]


def test_whole_budgets_as_llm_v0(tmp_path: Path) -> None:
    outcome, srv, _ = run_team(tmp_path, team(), budgets={"max_steps": 3})
    assert (outcome.sub_reason, len(srv.requests)) == ("BUDGET_STEPS", 3)
    outcome, srv, _ = run_team(tmp_path / "2", team(), max_steps=2)
    assert (outcome.sub_reason, len(srv.requests)) == ("MAX_STEPS", 2)
    # a router-heavy split: the whole budget, not the router's share, stops the 4th call
    outcome, srv, _ = run_team(
        tmp_path / "3", team(router=lambda b: {"next": "dance"}), max_noop=5,
        budgets={"max_tokens_total": 3000},
        budget_shares={"router": 0.97, "searcher": 0.01, "patcher": 0.01, "tester": 0.01})
    assert (outcome.sub_reason, len(srv.requests)) == ("BUDGET_TOKENS", 3)
    assert "> max_tokens_total=3000" in outcome.summary and "share" not in outcome.summary
    assert outcome.usage is not None and outcome.usage.total_tokens == 3 * 940


def test_bad_params_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(VariantError) as early:  # when the run starts
        run_team(tmp_path, team(), budget_shares={"router": 0.9})
    assert str(early.value) == ("variant t: params budget_shares: the shares add up to 1.700, "
                                "more than 1")
    model = {"preset": "local", "name": "m", "base_url": "http://127.0.0.1:9/v1"}
    agent = agent_builder(Variant("t", "subagents", model=model))()
    with pytest.raises(AgentError) as err:  # params that reach an attempt some other way
        agent.run(make_ctx(tmp_path, {"budget_shares": {"router": 0.9}}))
    assert err.value.sub_reason == "MODEL_CONFIG"
    assert str(err.value) == ("variant params: params budget_shares: the shares add up to "
                              "1.700, more than 1")


def test_bundled_variant_builds_the_agent() -> None:
    variant = load_variant("subagents")
    assert variant.agent == "subagents" and variant.params["budget_shares"]["router"] == 0.2
    variant.model = {**variant.model, "preset": "local", "base_url": "http://127.0.0.1:9/v1"}
    assert isinstance(agent_builder(variant)(), SubagentsAgent)


def test_a_specialist_repeating_one_failing_call_stops_the_run(tmp_path: Path) -> None:
    """Issue 25 item 7: the searcher sends the same invalid read_file again and again; the run
    stops on the third failure, long before its rounds run out."""

    def step(request: dict[str, Any]) -> Reply:
        role = role_of(request)
        if role == "router":
            return answer("delegate", {"next": "searcher", "brief": "find mean"}, role, True)
        return answer("read_file", {"path": "mathx.py", "bogus": 1}, role, True)

    outcome, srv, _ = run_team(tmp_path, step)
    assert (outcome.finished_by, outcome.reason, outcome.sub_reason) == (
        "repeated_error", Reason.AGENT_NO_PROGRESS, "REPEATED_TOOL_ERROR"), outcome.summary
    assert "searcher: the same read_file call failed 3 times" in outcome.summary
    searcher_calls = [r for r in srv.requests if role_of(r.json) == "searcher"]
    assert len(searcher_calls) == 3
