"""The HTML run report in a real headless Chromium (Debian's /usr/bin/chromium, via Playwright).

Skipped, with the reason, only when Chromium is absent outside CI; under CI (CI set) a missing
browser or Playwright fails the test, so the report is always exercised there.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.reporting.html import write_html

try:  # the browser test needs it; a missing package skips (or fails under CI) below
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover
    expect = None  # type: ignore[assignment]
from tests.support.synthetic import make_record, write_artifacts, write_run

CHROMIUM = os.environ.get("AGENTBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def _require_browser() -> Any:
    if not Path(CHROMIUM).exists() and not os.environ.get("CI"):
        pytest.skip(f"Chromium not found at {CHROMIUM} (install Debian's `chromium`); "
                    "this test never skips under CI")
    if not os.environ.get("CI"):
        pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import sync_playwright

    return sync_playwright


def _run(tmp_path: Path) -> Path:
    records = []
    for i in range(40):
        passed = i % 3 == 0
        suite = ("custom-dev", "custom-heldout")[i % 2]
        records.append(make_record("run-html", f"task-{i:03d}", suite, "llm_v0", 0, 1, passed,
                                   None if passed else "TESTS_FAILED", steps=4,
                                   duration=20.0 + i))
    evil = make_record("run-html", "task-<img src=x onerror=window.__xss=1>", "custom-dev",
                       "llm_v0", 0, 1, False, "TOOL_ERROR", steps=2, duration=5.0)
    evil["result"]["summary"] = "<script>window.__xss=2</script>"
    records.append(evil)
    records.append(make_record("run-html", "task-invalid", "custom-dev", "llm_v0", 0, 1, False,
                               "BASELINE_NOT_FAILING", steps=0, duration=1.0))
    run = write_run(tmp_path / "run", records, variant="llm_v0", run_id="run-html")
    write_artifacts(run, records[1], steps=3)  # task-001: a failed attempt with everything
    agent = run / "tasks" / "task-001" / "agent"
    with (agent / "conversation.jsonl").open("a") as fh:
        fh.write(json.dumps({"role": "tool", "content": "<img src=x onerror=window.__xss=3>"})
                 + "\n")
    (agent / "context_manifest.json").write_text(json.dumps({
        "version": 1, "agent": "context_packer", "budget_tokens": 6000, "chars_per_token": 4,
        "packs": [{"step": 1, "used_tokens": 5120, "items": [
            {"path": "pkg/stats.py", "start_line": 1, "end_line": 40, "included": True,
             "reason": "traceback frame (line 12)", "tokens": 300},
            {"path": "<img src=x onerror=window.__xss=4>", "start_line": None,
             "end_line": None, "included": False, "reason": "over budget", "tokens": 9000}]}]}))
    (agent / "delegation.json").write_text(json.dumps({"version": 1, "agent": "subagents",
        "nodes": [{"id": "s1", "parent": None, "role": "router", "step": 1, "calls": 1,
                   "prompt_tokens": 900, "completion_tokens": 40, "status": "ok",
                   "summary": "delegate to searcher"},
                  {"id": "s2", "parent": "s1", "role": "searcher", "step": 1, "calls": 2,
                   "prompt_tokens": 1200, "completion_tokens": 300, "status": "ok",
                   "summary": "<img src=x onerror=window.__xss=5>"}]}))
    bad = run / "tasks" / "task-002" / "agent"
    bad.mkdir(parents=True)
    (bad / "delegation.json").write_text("{broken")
    return run


def test_html_report_renders_and_drill_down_opens(tmp_path: Path) -> None:
    sync_playwright = _require_browser()
    run = _run(tmp_path)
    page_path = write_html(run)
    console: list[str] = []
    errors: list[str] = []
    remote: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page()
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: remote.append(r.url)
                    if not r.url.startswith(("file:", "data:")) else None)
            page.goto(page_path.as_uri())
            page.wait_for_load_state("load")

            assert page.locator("h1").inner_text() == "Run run-html"
            assert page.locator("svg").count() >= 4  # rate, taxonomy, duration, cost plots
            assert page.locator("tr.task").count() == 42

            row = page.locator('tr.task:has-text("task-001")')
            drill = row.locator("xpath=following-sibling::tr[1]")
            expect(drill).to_be_hidden()
            row.locator("button.open").click()
            expect(drill).to_be_visible()  # waits, unlike is_visible
            timeline = drill.locator("details", has_text="Event timeline")
            expect(timeline.locator("table.tl")).to_be_visible()
            expect(timeline.locator("td", has_text="task_finished")).to_be_visible()
            tools = drill.locator("details", has_text="Tool calls (3)").first
            expect(tools.locator("summary", has_text="step 1: read_file")).to_be_visible()
            tools.locator("summary", has_text="step 1: read_file").click()
            expect(tools.locator("pre", has_text="<script>alert(1)</script>")).to_be_visible()
            diff = drill.locator("pre.diff").last
            expect(diff).to_be_visible()
            assert diff.locator("span.add").first.inner_text().startswith("+")
            convo = drill.locator("details", has_text="Conversation")
            convo.locator("summary").first.click()
            convo.locator("summary", has_text="tool").click()
            expect(convo.locator("pre", has_text="onerror")).to_be_visible()

            ctx = drill.locator("details", has_text="Context manifest (1)")
            ctx.locator("summary").first.click()
            expect(ctx.locator("td", has_text="traceback frame (line 12)")).to_be_visible()
            expect(ctx.locator("tr.excluded td", has_text="onerror")).to_be_visible()
            expect(ctx.locator("p.pack", has_text="used 5120 of 6000")).to_be_visible()
            graph = drill.locator("details", has_text="Delegation (2)")
            graph.locator("summary").first.click()
            child = graph.locator("li.dnode li.dnode")  # the searcher, under the router
            expect(child.locator("span.role")).to_have_text("searcher")
            expect(graph.locator("td", has_text="searcher")).to_be_visible()  # per-role table
            assert graph.locator("li.dnode").count() == 2
            assert graph.locator("ul.dgraph:empty").count() == 0  # no list without children
            broken = page.locator('tr.task:has-text("task-002")')
            broken.locator("button.open").click()
            broken_drill = broken.locator("xpath=following-sibling::tr[1]")
            broken_drill.locator("summary", has_text="Delegation (unreadable)").click()
            expect(broken_drill.locator("p.note", has_text="not readable JSON")).to_be_visible()

            no_art = page.locator('tr.task:has-text("task-000")')
            no_art.locator("button.open").click()
            expect(page.locator("p.note", has_text="No artifact folder").first).to_be_visible()

            page.fill("#task-filter", "invalid")
            assert page.locator("tr.task:visible").count() == 1
            page.fill("#task-filter", "")
            page.select_option("#task-status", "excluded")
            assert page.locator("tr.task:visible").count() == 1
            page.select_option("#task-status", "all")

            evil = page.locator('tr.task:has-text("onerror")')
            evil.locator("button.open").click()
            assert page.evaluate("window.__xss === undefined")
        finally:
            browser.close()
    assert errors == [], errors
    assert console == [], console
    assert remote == [], remote
