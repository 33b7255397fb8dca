"""The HTML drill-down shows agent/context_manifest.json and agent/delegation.json, escaped;
a malformed or escaping file is one line, never a broken page."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest_agentbench.reporting.html.run_page as html
from pytest_agentbench.reporting.agent_artifacts import parse_delegation
from pytest_agentbench.reporting.load import load_run
from pytest_agentbench.reporting.summary import summarize
from tests.support.synthetic import make_record, write_run

EVIL = "<script>window.__xss=1</script>"
MANIFEST = {"version": 1, "agent": "context_packer", "budget_tokens": 6000,
            "chars_per_token": 4, "packs": [{"step": 1, "used_tokens": 5120, "items": [
                {"path": "pkg/stats.py", "start_line": 1, "end_line": 40, "included": True,
                 "reason": "traceback frame (line 12)", "tokens": 300},
                {"path": "pkg/big.py", "start_line": None, "end_line": None, "included": False,
                 "reason": "over budget " + EVIL, "tokens": 9000}]}]}
DELEGATION = {"version": 1, "agent": "subagents", "nodes": [
    {"id": "s1", "parent": None, "role": "router", "step": 1, "calls": 1, "prompt_tokens": 900,
     "completion_tokens": 40, "status": "ok", "summary": "delegate to searcher"},
    {"id": "s2", "parent": "s1", "role": "searcher", "step": 1, "calls": 2,
     "prompt_tokens": 1200, "completion_tokens": 300, "status": "ok", "summary": EVIL},
    {"id": "s3", "parent": "s1", "role": "patcher", "step": 2, "calls": 1,
     "prompt_tokens": 1500, "completion_tokens": 200, "status": "error", "summary": "bad diff"},
    {"id": "s4", "parent": None, "role": "router", "step": 2, "calls": 1, "prompt_tokens": 800,
     "completion_tokens": 30, "status": "ok", "summary": "finish"},
]}


def _run(tmp_path: Path, files: dict[str, dict[str, Any] | str]) -> Path:
    """One attempt per entry: task id -> {relative path under its artifacts: content}."""
    records = [make_record("run-a", task, "custom-dev", "context_packer", 0, 1, False,
                           "TESTS_FAILED", steps=2, duration=3.0) for task in files]
    run = write_run(tmp_path / "run", records, variant="context_packer", run_id="run-a")
    for task, content in files.items():
        agent = run / "tasks" / task / "agent"
        agent.mkdir(parents=True)
        for name, body in content.items():  # type: ignore[union-attr]
            (agent / name).write_text(body if isinstance(body, str) else json.dumps(body))
    return run


def _page(run: Path) -> tuple[str, dict[str, Any]]:
    loaded = load_run(run)
    page = html.render_html(loaded, summarize(loaded))
    data = json.loads(page.split('id="ab-data">')[1].split("</script>")[0])
    return page, {t["task_id"]: t["attempts"][0] for t in data["tasks"]}


def test_manifest_and_delegation_rows_are_embedded_and_escaped(tmp_path: Path) -> None:
    run = _run(tmp_path, {"t1": {"context_manifest.json": MANIFEST,
                                 "delegation.json": DELEGATION}, "t2": {}})
    page, attempts = _page(run)
    assert EVIL not in page and "window.__xss" in page  # the text is there, inert
    ctx = attempts["t1"]["context"]
    assert ctx["budget"] == 6000 and ctx["chars_per_token"] == 4
    assert ctx["packs"][0]["used"] == 5120
    assert ctx["packs"][0]["items"] == [
        ["pkg/stats.py", "1–40", "included", "traceback frame (line 12)", 300],
        ["pkg/big.py", "", "excluded", "over budget " + EVIL, 9000]]
    graph = attempts["t1"]["delegation"]
    assert [(r[0], r[1], r[6]) for r in graph["tree"]] == [
        (0, "router", "s1"), (1, "searcher", "s2"), (1, "patcher", "s3"), (0, "router", "s4")]
    assert graph["tree"][1][3] == 1500  # prompt + completion tokens
    assert graph["roles"] == [["router", 2, 2, 1700, 70, 1770],
                              ["patcher", 1, 1, 1500, 200, 1700],
                              ["searcher", 1, 2, 1200, 300, 1500]]
    assert attempts["t2"]["context"] is None and attempts["t2"]["delegation"] is None
    assert "Context manifest" in page and "Delegation graph (parent → child)" in page


def test_malformed_files_are_one_line(tmp_path: Path) -> None:
    run = _run(tmp_path, {
        "bad-json": {"context_manifest.json": "{not json", "delegation.json": "[]"},
        "bad-shape": {"context_manifest.json": {"packs": [{"items": "nope"}]},
                      "delegation.json": {"nodes": [{"id": "a"}, {"id": "a"}]}},
    })
    _, attempts = _page(run)
    assert attempts["bad-json"]["context"]["error"].startswith(
        "agent/context_manifest.json: not readable JSON")
    assert attempts["bad-json"]["delegation"] == {
        "error": "agent/delegation.json: top level: expected an object, got list"}
    assert attempts["bad-shape"]["context"] == {
        "error": "agent/context_manifest.json: packs[0].items: expected a list, got str"}
    assert "nodes[1].id: expected a unique string" in attempts["bad-shape"]["delegation"]["error"]
    for a in attempts.values():
        assert "\n" not in a["context"]["error"] + a["delegation"]["error"]


def test_a_file_linking_outside_the_run_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(DELEGATION))
    run = _run(tmp_path, {"t1": {}})
    os.symlink(secret, run / "tasks" / "t1" / "agent" / "delegation.json")
    _, attempts = _page(run)
    assert attempts["t1"]["delegation"] == {
        "error": "agent/delegation.json: not shown (tasks/t1/agent/delegation.json: a "
                 "symbolic link)"}


def test_cycles_and_unknown_parents_become_roots() -> None:
    g = parse_delegation({"nodes": [{"id": "a", "parent": "b", "role": "x"},
                                    {"id": "b", "parent": "a", "role": "y"},
                                    {"id": "c", "parent": "zz", "role": "z", "calls": True}]})
    assert [(r[0], r[6]) for r in g["tree"]] == [(0, "c"), (0, "a"), (1, "b")]
    assert g["tree"][0][2] is None  # a bool is no count
