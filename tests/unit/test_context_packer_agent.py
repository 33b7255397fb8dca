"""The context_packer agent against a real OpenAI-compatible server on loopback: the first user
message carries the code the (real) pytest failure points at, read through the toolbox, and
context_manifest.json and a `context_packed` note say what was packed.

The toolbox is the stand-in over a temporary directory (tests/support/fake_toolbox.py; the real
one is tested in test_tools.py); its `run` runs pytest there for real."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.agents.context_packer import ContextPackerAgent
from pytest_agentbench.agents.port import AgentContext, AgentError
from pytest_agentbench.agents.variants import Variant, VariantError, agent_builder, load_variant
from pytest_agentbench.core.event_sink import EventSink
from pytest_agentbench.schemas.task import TaskSpec
from pytest_agentbench.schemas.taxonomy import Reason
from tests.fakes.openai_server import FakeOpenAIServer, Step, tool_reply
from tests.support.fake_toolbox import DirToolbox

FAILING = "python -m pytest -q -p no:cacheprovider tests/test_stats.py"
STATS = ('"""Small statistics."""\n\nimport math\n\n\ndef mean(xs):\n'
         '    return sum(xs) / (len(xs) - 1)\n\n\ndef spread(xs):\n'
         '    return max(xs) - min(xs)\n')
HELPERS = "def clean(xs):\n    return [x for x in xs if x is not None]\n"
TEST = ("from pkg.helpers import clean\nfrom pkg.stats import mean\n\n\ndef test_mean():\n"
        "    assert mean(clean([1, 2, None, 3])) == 2\n")
FIX = ("--- a/pkg/stats.py\n+++ b/pkg/stats.py\n@@ -6,2 +6,2 @@\n def mean(xs):\n"
       "-    return sum(xs) / (len(xs) - 1)\n+    return sum(xs) / len(xs)\n")
TASK = TaskSpec.model_validate({
    "task_spec_version": 1, "id": "fix-stats-mean", "suite": "unit",
    "description": "mean() divides by n - 1",
    "repo": {"url": "repo.bundle", "commit": "abcdef1"},
    "validation": {"failing_command": FAILING, "passing_command": FAILING},
})


def run_tests(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "tests/test_stats.py"], cwd=root,
                          capture_output=True, text=True, timeout=60)


def grade(root: Path) -> tuple[int, str]:
    """`run`, whatever the command: pytest on tests/test_stats.py, for real."""
    proc = run_tests(root)
    return proc.returncode, proc.stdout


def make_ctx(tmp_path: Path, params: dict[str, Any]) -> AgentContext:
    work = tmp_path / "work"
    for name, text in {"pkg/__init__.py": "", "pkg/stats.py": STATS, "pkg/helpers.py": HELPERS,
                       "tests/test_stats.py": TEST}.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    baseline = run_tests(work)
    assert baseline.returncode == 1, baseline.stdout
    events = EventSink(tmp_path / "artifacts" / "events.jsonl", "run-1", TASK.id, "a-1")
    return AgentContext(task=TASK, task_dir=tmp_path, toolbox=DirToolbox(work, grade),
                        events=events, failing_output=baseline.stdout, failing_command=FAILING,
                        deadline=time.monotonic() + 60, max_steps=10, params=params,
                        artifacts_dir=tmp_path / "artifacts" / "agent")


def variant(base_url: str, **params: Any) -> Variant:
    return Variant("cp", "context_packer", params=params, model={
        "preset": "local", "name": "fake/model-1", "base_url": base_url, "timeout_sec": 5.0,
        "max_retries": 0, "max_tokens": 256})


def run(tmp_path: Path, **params: Any) -> tuple[Any, FakeOpenAIServer, AgentContext]:
    steps: list[Step] = [tool_reply("apply_patch", {"unified_diff": FIX}),
                         tool_reply("run", {"command": FAILING}),
                         tool_reply("finish", {"summary": "mean divides by len(xs)"})]
    with FakeOpenAIServer(steps) as srv:
        v = variant(srv.base_url, **params)
        agent = agent_builder(v)()
        assert isinstance(agent, ContextPackerAgent) and agent.name == "context_packer"
        ctx = make_ctx(tmp_path, v.params)
        outcome = agent.run(ctx)
    return outcome, srv, ctx


def manifest_of(ctx: AgentContext) -> dict[str, Any]:
    assert ctx.artifacts_dir is not None
    data: dict[str, Any] = json.loads((ctx.artifacts_dir / "context_manifest.json").read_text())
    return data


def test_first_message_carries_the_packed_code_and_the_manifest_says_why(tmp_path: Path) -> None:
    outcome, srv, ctx = run(tmp_path)
    assert (outcome.finished_by, outcome.reason) == ("finish", None)
    assert "/ len(xs)\n" in (tmp_path / "work" / "pkg" / "stats.py").read_text()

    first = srv.requests[0].json["messages"]
    assert [m["role"] for m in first] == ["system", "user"]
    user = first[1]["content"]
    assert FAILING in user and "FAILED tests/test_stats.py::test_mean" in user
    assert "packed by context_packer" in user
    assert "pkg/stats.py (lines 6-7):\n```python\ndef mean(xs):\n" \
           "    return sum(xs) / (len(xs) - 1)\n```" in user
    assert "pkg/helpers.py (lines 1-2)" in user and "tests/test_stats.py (lines 5-6)" in user

    data = manifest_of(ctx)
    assert (data["version"], data["agent"], data["budget_tokens"], data["chars_per_token"]) == (
        1, "context_packer", 6000, 4)
    [step] = data["packs"]
    items = step["items"]
    assert step["step"] == 1 and step["used_tokens"] == sum(
        i["tokens"] for i in items if i["included"]) > 0
    # the failing line is in the test; `mean` is named there, so its definition comes next
    assert items[0] == {"path": "tests/test_stats.py", "start_line": 5, "end_line": 6,
                        "included": True, "reason": "traceback frame (line 6): whole function",
                        "tokens": items[0]["tokens"]}
    assert {"path": "pkg/stats.py", "start_line": 6, "end_line": 7, "included": True,
            "reason": "definition of mean (named in the failure, imported by "
                      "tests/test_stats.py)", "tokens": 23} in items
    assert {"path", "start_line", "end_line", "included", "reason", "tokens"} == set(items[-1])
    assert any(i["path"] == "pkg/helpers.py" and i["included"] for i in items)

    [note] = [e for e in ctx.events.of_type("note") if e["kind"] == "context_packed"]  # type: ignore[attr-defined]
    assert note["data"] == {"used_tokens": step["used_tokens"],
                            "items": sum(i["included"] for i in items),
                            "excluded": sum(not i["included"] for i in items)}
    calls = [c[0] for c in ctx.toolbox.calls]  # type: ignore[attr-defined]
    assert calls[0] == "list_files" and calls[-3:] == ["apply_patch", "run", "finish"]
    assert {c[1]["path"] for c in ctx.toolbox.calls if c[0] == "read_file"} == {  # type: ignore[attr-defined]
        "pkg/stats.py", "tests/test_stats.py", "pkg/helpers.py"}


def test_a_small_budget_packs_less_and_says_so(tmp_path: Path) -> None:
    # the test (28 tokens) fits; clean's definition (26) does not, mean's (23) does
    _, srv, ctx = run(tmp_path, context_budget_tokens=52)
    [step] = manifest_of(ctx)["packs"]
    assert step["used_tokens"] == 51
    over = [i for i in step["items"] if i["reason"].startswith("over budget")]
    assert over[0]["path"] == "pkg/helpers.py" and over[0]["reason"].startswith(
        "over budget (26 tokens, 24 left): definition of clean")
    user = srv.requests[0].json["messages"][1]["content"]
    assert "return sum(xs) / (len(xs) - 1)" in user and "pkg/helpers.py (lines" not in user


def test_a_zero_budget_leaves_llm_v0s_first_message(tmp_path: Path) -> None:
    _, srv, ctx = run(tmp_path, context_budget_tokens=0)
    assert manifest_of(ctx)["packs"][0]["used_tokens"] == 0
    assert "packed by" not in srv.requests[0].json["messages"][1]["content"]


def test_a_bad_param_is_one_line_naming_it(tmp_path: Path) -> None:
    with FakeOpenAIServer([]) as srv:
        v = variant(srv.base_url, context_budget_tokens="lots")
        with pytest.raises(VariantError) as early:  # when the run starts
            agent_builder(v)
        with pytest.raises(AgentError) as info:  # an agent made some other way: per attempt
            ContextPackerAgent(agent_builder(variant(srv.base_url)).args[0]).run(
                make_ctx(tmp_path, v.params))
    assert "params context_budget_tokens" in str(early.value) and "\n" not in str(early.value)
    assert info.value.reason == Reason.LLM_ERROR and info.value.sub_reason == "MODEL_CONFIG"
    assert "params context_budget_tokens" in str(info.value) and "\n" not in str(info.value)
    assert srv.requests == []


def test_the_bundled_variant() -> None:
    v = load_variant("context_packer")
    assert v.agent == "context_packer" and v.params["context_budget_tokens"] == 6000
    assert "context_packer.yaml" in v.source
