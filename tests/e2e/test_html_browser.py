"""The HTML run report in a real headless Chromium (Debian's /usr/bin/chromium, via Playwright).

Skipped, with the reason, only when Chromium is absent outside CI; under CI (CI set) a missing
browser or Playwright fails the test, so the report is always exercised there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pytest_agentbench.reporting.html.run_page import write_html

try:  # the browser test needs it; a missing package skips (or fails under CI) below
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover
    expect = None  # type: ignore[assignment]
from tests.support.browser import launch, require_browser
from tests.support.synthetic import make_record, write_artifacts, write_run


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
    (run / "tasks" / "task-001" / "diffs" / "final.patch").write_text("")  # it changed nothing
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
    sync_playwright = require_browser()
    run = _run(tmp_path)
    page_path = write_html(run)
    console: list[str] = []
    errors: list[str] = []
    remote: list[str] = []
    with sync_playwright() as p:
        browser = launch(p)
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
            timeline = drill.locator("details", has_text="Event timeline").first
            expect(timeline.locator("svg.timeline")).to_be_visible()  # bars, not a table
            assert timeline.locator("rect.span-tool").count() == 3  # three tool calls
            assert timeline.locator("svg.timeline text", has_text=" s").count() >= 2  # seconds
            timeline.locator("summary", has_text="Events (7)").click()
            expect(timeline.locator("td", has_text="task_finished")).to_be_visible()
            tools = drill.locator("details", has_text="Tool calls (3)").first
            expect(tools.locator("summary", has_text="step 1: read_file")).to_be_visible()
            tools.locator("summary", has_text="step 1: read_file").click()
            expect(tools.locator("pre", has_text="<script>alert(1)</script>")).to_be_visible()
            diff = drill.locator("pre.diff").last
            expect(diff).to_be_visible()
            assert diff.locator("span.add").first.inner_text().startswith("+")
            drill.locator("summary", has_text="final.patch").click()  # empty: not a blank box
            expect(drill.locator("p.no-change")).to_have_text(
                "no change: the patch is empty (the repository was left as it was)")
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

            page.goto(page_path.as_uri() + "#task-no-such-task")
            page.wait_for_load_state("load")
            expect(page.locator("#missing-task")).to_have_text(
                "Task no-such-task is not on this page.")

            evil = page.locator('tr.task:has-text("onerror")')
            evil.locator("button.open").click()
            assert page.evaluate("window.__xss === undefined")
        finally:
            browser.close()
    assert errors == [], errors
    assert console == [], console
    assert remote == [], remote


EVIL_TASK = "task-<img src=x onerror=window.__xss=11>"
EVIL_VARIANT = "<script>window.__xss=12</script><img src=x onerror=window.__xss=13>"


def _pair_runs(root: Path) -> list[Path]:
    """Three runs under one output root. A and B differ on task-001, -004, -005, -006, -007
    and the evil task; costs grow with steps: C (cheapest, 4/9) and B (dearest, 7/9) are on the
    frontier, A (3/9, dearer than C) is dominated."""
    runs = []
    for name, steps, fails in (("a", 3, {1, 3, 4, 5, 7}), ("b", 5, {3, 6}), ("c", 1, {0, 1, 2, 3})):
        variant = EVIL_VARIANT if name == "b" else f"variant-{name}"
        recs = [make_record(f"run-{name}", f"task-{i:03d}", "custom-dev", variant, 0, 1,
                            i not in fails, "TESTS_FAILED" if i in fails else None, steps=steps,
                            duration=10.0 + i) for i in range(8)]
        recs.append(make_record(f"run-{name}", EVIL_TASK, "custom-dev", variant, 0, 1,
                                name == "b", None if name == "b" else "TESTS_FAILED",
                                steps=steps, duration=3.0))
        recs[-1]["result"]["summary"] = "" if name == "b" else "<script>window.__xss=14</script>"
        run = write_run(root / name, recs, variant=variant, run_id=f"run-{name}")
        runs.append(run)
    return runs


def _watch(page: Any, errors: list[str], console: list[str], remote: list[str]) -> None:
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: remote.append(r.url)
            if not r.url.startswith(("file:", "data:")) else None)


def test_paired_compare_and_index_pages(tmp_path: Path) -> None:
    from pytest_agentbench.reporting.compare import compare_runs
    from pytest_agentbench.reporting.html.index import write_index
    from pytest_agentbench.reporting.html.pages import write_compare_html, write_paired_html
    from pytest_agentbench.reporting.load import load_runs
    from pytest_agentbench.reporting.paired import compare

    sync_playwright = require_browser()
    root = tmp_path / "out"
    paths = _pair_runs(root)
    index = write_index(root)
    for p in paths:
        write_html(p)  # after the index: each run page links back to it
    a, b, c = load_runs(paths, fields="all")
    pages = tmp_path / "pages"
    paired = write_paired_html(compare(a, b, resamples=500), pages / "paired.html")
    comp = write_compare_html(compare_runs([a, b, c], resamples=500), pages / "compare.html")
    errors: list[str] = []
    console: list[str] = []
    remote: list[str] = []
    shots = Path(os.environ.get("AGENTBENCH_SHOTS", "/tmp"))
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            _watch(page, errors, console, remote)

            page.goto(paired.as_uri())
            page.wait_for_load_state("load")
            assert page.locator("h1").inner_text().startswith("Paired: A variant-a vs B <script>")
            rows = page.locator("tr.pair-task")
            assert rows.count() == 9
            discordant = page.locator("tr.pair-task.discordant")
            assert discordant.count() == 6
            for i in range(6):  # discordant tasks come first
                assert "discordant" in (rows.nth(i).get_attribute("class") or "")
            assert page.locator("tr.pair-task.discordant .cell.b_only").count() == 5
            assert page.locator('[data-card="mcnemar"] b').inner_text() != "—"
            align = "e => getComputedStyle(e).textAlign"  # numbers under their own headers
            for header in ("A passed", "B passed"):
                th = page.locator("#pairs th", has_text=header)
                assert th.evaluate(align) == rows.first.locator("td.num").first.evaluate(align)
            page.screenshot(path=str(shots / "agentbench-paired.png"), full_page=True)

            evil_row = page.locator("tr.pair-task", has_text="onerror")
            evil_row.locator("a.to-b").click()
            page.wait_for_load_state("load")
            assert page.url.startswith((root / "b" / "report.html").as_uri())
            target = page.locator("tr.task.target")
            expect(target).to_have_count(1)
            assert "onerror" in target.inner_text()
            expect(target.locator("xpath=following-sibling::tr[1]")).to_be_visible()
            assert page.evaluate("window.__xss === undefined")

            page.go_back()
            page.wait_for_load_state("load")
            page.locator("tr.pair-task", has_text="task-004").locator("a.to-a").click()
            page.wait_for_load_state("load")
            assert page.url.startswith((root / "a" / "report.html").as_uri())
            target = page.locator("tr.task.target")
            expect(target).to_contain_text("task-004")
            drill = target.locator("xpath=following-sibling::tr[1]")
            expect(drill).to_be_visible()
            expect(drill.locator("th", has_text="outcome")).to_be_visible()
            page.screenshot(path=str(shots / "agentbench-run-drilldown.png"))

            page.goto(comp.as_uri())
            page.wait_for_load_state("load")
            assert page.locator("table#runs tr.run").count() == 3
            assert page.locator("circle.point").count() == 3
            assert page.locator("path.frontier-line").count() == 1
            assert page.locator("path.error-bar").count() == 3
            frontier = page.locator("tr.run.on-frontier")
            assert frontier.count() == 2
            assert "variant-a" not in frontier.all_inner_texts()[0] + frontier.all_inner_texts()[1]
            page.screenshot(path=str(shots / "agentbench-compare.png"), full_page=True)
            page.locator("table#runs a", has_text="variant-c").click()
            page.wait_for_load_state("load")
            assert page.locator("h1").inner_text() == "Run run-c"

            page.goto(index.as_uri())
            page.wait_for_load_state("load")
            assert page.locator("tr.run-row").count() == 3
            first = page.locator("tr.run-row").first  # the id and the date stay on one line
            for cell in (first.locator("td").nth(0), first.locator("td").nth(2)):
                assert cell.evaluate("e => getComputedStyle(e).whiteSpace") == "nowrap"
            page.screenshot(path=str(shots / "agentbench-index.png"), full_page=True)
            page.locator("tr.run-row a", has_text="b").first.click()
            page.wait_for_load_state("load")
            assert page.locator("h1").inner_text() == "Run run-b"
            page.locator("a", has_text="all runs").click()
            page.wait_for_load_state("load")
            assert page.url == index.as_uri()
            assert page.evaluate("window.__xss === undefined")
        finally:
            browser.close()
    assert errors == [], errors
    assert console == [], console
    assert remote == [], remote
