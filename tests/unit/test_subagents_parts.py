"""The subagents variant's parts without a model: structured-answer parsing, params and budget
shares, and the delegation graph (events and delegation.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentbench.agents.subagents.graph import DelegationGraph
from pytest_agentbench.agents.subagents.roles import DEFAULT_SHARES, SPECS, SubagentParams
from pytest_agentbench.agents.subagents.router import normalize_choice
from pytest_agentbench.agents.subagents.state import State
from pytest_agentbench.agents.subagents.structured import answer_from, answer_from_text
from pytest_agentbench.core.event_sink import EventSink
from pytest_agentbench.llm import (
    AssistantMessage,
    ChatResult,
    ModelConfigError,
    TokenUsage,
    ToolCall,
)
from pytest_agentbench.schemas.events import EventAdapter
from pytest_agentbench.schemas.records import AttemptRecord
from pytest_agentbench.schemas.records import Usage as RecordUsage

ROUTER = SPECS["router"]
PATCHER = SPECS["patcher"]
DIFF = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"


def result(content: str = "", calls: list[ToolCall] | None = None,
           source: str = "native") -> ChatResult:
    return ChatResult(AssistantMessage(content, calls or []), "stop", TokenUsage(), 0, 0, 0, None,
                      source)  # type: ignore[arg-type]


# -- structured answers ----------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    '{"next": "searcher", "brief": "find mean"}',
    'Sure.\n```json\n{"next": "searcher", "brief": "find mean"}\n```\nThat is all.',
    'I think {"next": "searcher", "brief": "find mean"} is best',
    '{"name": "delegate", "arguments": {"next": "searcher", "brief": "find mean"}}',
    '{"function": {"name": "delegate", "arguments": "{\\"next\\": \\"searcher\\"}"}}',
    '<think>{"plan": 1}</think> {"next": "searcher"}',
])
def test_router_answer_in_any_written_form(text: str) -> None:
    answer = answer_from_text(text, ROUTER.answer_name, ROUTER.required)
    assert answer is not None and answer["next"] == "searcher"


def test_native_answer_call_wins_and_bad_ones_are_none() -> None:
    native = ToolCall("c1", "delegate", {"next": "tester", "brief": "run it"})
    assert answer_from(result("", [native]), "delegate", ("next",)) == native.arguments
    broken = ToolCall("c1", "delegate", {}, arguments_error="not JSON", raw_arguments="{")
    assert answer_from(result("", [broken]), "delegate", ("next",)) is None
    assert answer_from_text('{"brief": "no next"}', "delegate", ("next",)) is None
    assert answer_from_text("let me think", "delegate", ("next",)) is None
    assert answer_from_text('{"next": ""}', "delegate", ("next",)) is None


def test_patcher_diff_as_json_or_as_a_fence() -> None:
    as_json = json.dumps({"unified_diff": DIFF, "summary": "x is 2"})
    assert answer_from_text(as_json, PATCHER.answer_name, PATCHER.required) == {
        "unified_diff": DIFF, "summary": "x is 2"}
    fenced = f"Here is the fix:\n```diff\n{DIFF}```\n"
    answer = answer_from_text(fenced, PATCHER.answer_name, PATCHER.required)
    assert answer is not None and answer["unified_diff"] == DIFF
    bare = answer_from_text(f"Fix:\n{DIFF}", PATCHER.answer_name, PATCHER.required)
    assert bare is not None and bare["unified_diff"] == DIFF
    # a router never takes a diff for a decision
    assert answer_from_text(fenced, ROUTER.answer_name, ROUTER.required) is None


@pytest.mark.parametrize(("raw", "choice"), [
    ("searcher", "searcher"), ("Search", "searcher"), ("patch", "patcher"), ("test", "tester"),
    ("done", "finish"), ("give up", "give_up"), ("deploy", None), (3, None)])
def test_router_choices_and_synonyms(raw: object, choice: str | None) -> None:
    assert normalize_choice(raw) == choice


def test_candidates_from_a_searcher_answer_are_checked() -> None:
    state = State("t", "cmd", "out")
    raw = [{"path": "a.py", "start_line": 3, "end_line": 9, "snippet": "x" * 50, "why": "w"},
           "b.py", {"path": ""}, {"no": "path"}, 7, {"path": "a.py"}]
    assert state.add_candidates(raw, max_candidates=8, snippet_chars=10) == 2
    assert [c.path for c in state.candidates] == ["a.py", "b.py"]
    assert state.candidates[0].snippet == "x" * 10 and state.candidates[0].line() == "a.py:3-9 (w)"
    assert state.add_candidates("not a list", 8, 10) == 0


# -- params ----------------------------------------------------------------------------------
def test_default_params_and_shares() -> None:
    params = SubagentParams.parse({"max_steps": 5, "other": "ignored"})
    assert params.shares() == DEFAULT_SHARES and sum(DEFAULT_SHARES.values()) == pytest.approx(1)
    assert params.prompt_name("tester") == "subagents_tester_v1"
    merged = SubagentParams.parse({"budget_shares": {"router": 0.1}}).shares()
    assert merged["router"] == 0.1 and merged["searcher"] == 0.3


@pytest.mark.parametrize(("params", "message"), [
    ({"budget_shares": {"router": 0.5}}, "params budget_shares: the shares add up to 1.300"),
    ({"budget_shares": {"critic": 0.1}}, "params: unknown role 'critic'"),
    ({"budget_shares": {"tester": 0}}, "params budget_shares.tester: expected a number in (0, 1]"),
    ({"budget_shares": {"tester": "a lot"}}, "params budget_shares.tester:"),
    ({"budget_shares": [0.2]}, "params budget_shares:"),
    ({"max_calls_per_delegation": 0}, "params max_calls_per_delegation:"),
    ({"prompts": {"boss": "x"}}, "params: unknown role 'boss'"),
])
def test_bad_params_are_one_line_naming_the_field(params: dict, message: str) -> None:
    with pytest.raises(ModelConfigError) as err:
        SubagentParams.parse(params)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


# -- the graph -------------------------------------------------------------------------------
def test_graph_events_and_file(tmp_path: Path) -> None:
    sink = EventSink(tmp_path / "events.jsonl", "run-1", "t", "a-1")
    graph = DelegationGraph(sink, tmp_path, "subagents")
    router = graph.start("router", None, 1, "round 1")
    router.calls, router.prompt_tokens, router.completion_tokens = 1, 900, 40
    graph.end(router, "ok", "delegate to searcher:\n find   mean")
    searcher = graph.start("searcher", router, 1, "find mean")
    searcher.calls, searcher.prompt_tokens = 2, 3000
    graph.end(searcher, "ok", "1 candidate")
    graph.end(searcher, "failed", "a second end is ignored")

    data = json.loads((tmp_path / "delegation.json").read_text())
    assert data == {"version": 1, "agent": "subagents", "nodes": [
        {"id": "s1", "parent": None, "role": "router", "step": 1, "calls": 1,
         "prompt_tokens": 900, "completion_tokens": 40, "status": "ok",
         "summary": "delegate to searcher: find mean"},
        {"id": "s2", "parent": "s1", "role": "searcher", "step": 1, "calls": 2,
         "prompt_tokens": 3000, "completion_tokens": 0, "status": "ok",
         "summary": "1 candidate"}]}
    lines = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    for line in lines:
        EventAdapter.validate_python(line)  # a reader accepts every written line
    assert [(e["type"], e["span_id"]) for e in lines] == [
        ("delegation_start", "s1"), ("delegation_end", "s1"),
        ("delegation_start", "s2"), ("delegation_end", "s2")]
    assert lines[2]["parent_span_id"] == "s1" and lines[3]["calls"] == 2


def test_usage_by_role_is_optional_in_records() -> None:
    assert RecordUsage().by_role == {}
    old = RecordUsage.model_validate({"llm_calls": 2, "total_tokens": 10})
    assert old.by_role == {}
    new = RecordUsage.model_validate({"by_role": {"router": {"llm_calls": 1, "total_tokens": 5}}})
    assert new.by_role["router"].total_tokens == 5
    with pytest.raises(ValueError):
        RecordUsage.model_validate({"by_role": {"router": {"tokens": 5}}})
    assert "by_role" in AttemptRecord.model_json_schema()["$defs"]["Usage"]["properties"]
