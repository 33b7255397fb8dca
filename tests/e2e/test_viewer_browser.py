"""`agentbench view` in a real headless Chromium (Debian's /usr/bin/chromium, via Playwright).

Every page of the viewer renders with no console error and no page error (a CSP violation is a
console error), hostile run content (task ids, summaries, variant names, commands holding
`<script>` and `<img onerror>`) stays text (window.__xss stays unset), and the runs index and the
run page follow a run in progress without a reload: one written file by file as the plugin writes
it, and a real run of the plugin (local sandbox, scripted agent) in a subprocess. Screenshots go
to $AGENTBENCH_SHOTS when it is set. Skipped only when Chromium is absent outside CI.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from pytest_agentbench.viewer.server import Viewer
from tests.support.browser import launch, require_browser
from tests.support.plugin_runs import PluginRunner, python_m_pytest
from tests.support.viewer_roots import EVIL_COMMAND, EVIL_TASK, EVIL_VARIANT, LiveRun, paired_root

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover
    expect = None  # type: ignore[assignment]

SHOTS = os.environ.get("AGENTBENCH_SHOTS")


@contextmanager
def browser_page(root: Path) -> Iterator[tuple[Any, str, list[str]]]:
    """A page, the viewer's URL and the problems seen (console errors and warnings, page
    errors, any request that left the viewer's origin)."""
    sync_playwright = require_browser()
    viewer = Viewer(root, port=0).start()
    problems: list[str] = []
    try:
        with sync_playwright() as p:
            browser = launch(p)
            try:
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                context.set_default_timeout(15_000)
                context.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                           if m.type in ("error", "warning") else None)
                context.on("weberror", lambda e: problems.append(f"page error: {e.error}"))
                context.on("request", lambda r: problems.append(f"request {r.url}")
                           if not r.url.startswith((viewer.url, "data:")) else None)
                page = context.new_page()
                yield page, viewer.url.rstrip("/"), problems
            finally:
                browser.close()
    finally:
        viewer.close()


def shot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def inert(page: Any) -> None:
    assert page.evaluate("window.__xss === undefined"), page.url


def pick_both(page: Any, url: str) -> None:
    page.goto(f"{url}/_view/")
    rows = page.locator("#runs-table tr.run")
    expect(rows).to_have_count(2)
    for name in ("run-a", "run-b"):
        page.locator("#runs-table tr.run", has_text=name).locator("input").check()


def test_every_view_renders_and_run_content_stays_inert(tmp_path: Path) -> None:
    root = paired_root(tmp_path)
    with browser_page(root) as (page, url, problems):
        page.goto(f"{url}/")  # redirected to the runs index
        expect(page.locator("#runs-table tr.run")).to_have_count(2)
        expect(page.locator("#runs-table td", has_text=EVIL_VARIANT)).to_be_visible()
        run_a = page.locator("#runs-table tr.run", has_text="run-a")
        expect(run_a).to_contain_text("55.6%")  # 5 of 9
        inert(page)
        shot(page, "index")

        pick_both(page, url)
        page.click("#go-paired")
        expect(page.locator("h1")).to_contain_text("Paired: A variant-a vs B")
        expect(page.locator("tr.pair-task")).to_have_count(9)
        expect(page.locator("tr.pair-task.discordant")).to_have_count(3)  # 1, 4, the evil one
        inert(page)
        shot(page, "paired")
        page.locator("tr.pair-task", has_text=EVIL_TASK).locator("a.to-a").click()
        expect(page.locator("h1")).to_have_text("Run run-a")  # reporting's run page, rendered
        expect(page.locator("tr.task.target")).to_contain_text(EVIL_TASK)  # its drill-down
        inert(page)
        shot(page, "run-report")

        pick_both(page, url)
        page.click("#go-compare")
        expect(page.locator("h1")).to_have_text("Comparison of 2 runs")
        expect(page.locator("#runs tr.run")).to_have_count(2)
        inert(page)
        shot(page, "compare")

        pick_both(page, url)
        page.click("#go-side")
        page.select_option("#task-pick", EVIL_TASK)
        side = page.locator("#side")
        expect(side.locator("h3")).to_have_count(2)
        expect(side.locator("p.fail", has_text="TOOL_ERROR")).to_be_visible()  # A
        expect(side.locator("p.pass")).to_be_visible()  # B passed it
        tools = side.locator("[data-section='Tool calls']")
        expect(tools).to_have_count(2)
        tools.first.locator("summary", has_text="step 3: run").click()
        expect(tools.first.locator("pre", has_text=EVIL_COMMAND)).to_be_visible()
        expect(side.locator("[data-section='Diffs'] pre.diff span.add").last).to_be_visible()
        expect(side.locator("[data-section='Conversation'] summary").first).to_be_visible()
        inert(page)
        shot(page, "side-by-side")

        page.goto(f"{url}/_view/run?run=run-a")
        expect(page.locator("#attempts-table tr.attempt")).to_have_count(9)
        summary = page.locator("#attempts-table td", has_text="<script>window.__xss=2")
        expect(summary).to_be_visible()
        inert(page)
        shot(page, "run")

        page.goto(f"{url}/_view/search")
        page.fill("#q", "onerror")
        page.press("#q", "Enter")
        hits = page.locator("#hits-table tr.hit")
        expect(hits.filter(has_text="command")).to_have_count(2)  # run-a and run-b's tool call
        expect(hits.filter(has_text="task").first).to_be_visible()
        page.goto(f"{url}/_view/search?q=test_%3Cb%3Ebold&in=signature")
        expect(page.locator("#hits-table tr.hit")).to_have_count(2)
        expect(page.locator("#hits-table b")).to_have_count(0)  # the signature's tag is text
        inert(page)
        shot(page, "search")

        page.goto(f"{url}/_view/paired?a=run-a&b=no-such-run")
        expect(page.locator("#error")).to_contain_text("no run named 'no-such-run'")
    assert [p for p in problems if "404" not in p] == [], problems
    assert len(problems) == 1, problems  # the deliberate no-such-run page's 404 only


def test_index_and_run_page_follow_a_run_written_file_by_file(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    with browser_page(root) as (page, url, problems):
        page.goto(f"{url}/_view/")
        expect(page.locator("#runs p.note")).to_contain_text("No run under")
        page.evaluate("window.__stay = 1")  # gone if the page were reloaded
        live = LiveRun(root)
        live.start("task-one")
        live.phase("task-one", "setup")
        running = page.locator("#live tr.running")
        expect(running).to_have_count(1)
        expect(running).to_contain_text("setup")
        expect(page.locator("#runs-table tr.run", has_text="run-live")).to_contain_text("running")
        live.phase("task-one", "agent")
        live.step("task-one", 1, "read_file")
        expect(running).to_contain_text("read_file")
        shot(page, "live-index")
        live.finish("task-one", passed=True)
        expect(running).to_have_count(0)  # recorded: no longer running
        expect(page.locator("#runs-table tr.run", has_text="run-live")).to_contain_text("100.0%")

        run_page = page.context.new_page()
        run_page.goto(f"{url}/_view/run?run=run-live")
        run_page.evaluate("window.__stay = 1")
        expect(run_page.locator("#attempts-table tr.attempt")).to_have_count(1)
        live.start("task-two")
        live.phase("task-two", "baseline")
        expect(run_page.locator("#live tr.running")).to_contain_text("baseline")
        live.finish("task-two", passed=False)
        expect(run_page.locator("#attempts-table tr.attempt")).to_have_count(2)
        expect(run_page.locator("#attempts-table tr.attempt").last).to_contain_text("TESTS_FAILED")
        shot(run_page, "live-run")
        live.end()
        expect(page.locator("#runs-table tr.run", has_text="run-live")).to_contain_text("finished")
        expect(run_page.locator("#info .badge")).to_have_text("finished")
        assert page.evaluate("window.__stay") == 1 and run_page.evaluate("window.__stay") == 1
    assert problems == [], problems


def test_index_follows_a_real_run_of_the_plugin(tmp_path: Path) -> None:
    runner = PluginRunner(tmp_path / "work", sandbox="local")
    runner.root.mkdir()
    runner.out.mkdir()
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([
        {"tool": "run", "arguments": {"command": "sleep 2"}},
        {"tool": "run",
         "arguments": {"command": "sleep 2 && echo '<img src=x onerror=window.__xss=7>'"}},
    ]))
    variant = tmp_path / "slow.yaml"
    variant.write_text(yaml.safe_dump({"name": "slow", "agent": "scripted",
                                       "params": {"script": str(script)}}))
    args = runner.args("-k", "fix-mean-off-by-one or fix-parse-size-units",
                       f"--agentbench-variant={variant}")
    seen_running: set[str] = set()
    seen_attempts: list[str] = []
    with browser_page(runner.out) as (page, url, problems):
        page.goto(f"{url}/_view/")
        proc = subprocess.Popen(python_m_pytest(args), cwd=runner.root, env=runner.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 240
            while proc.poll() is None and time.monotonic() < deadline:
                seen_running.update(page.locator("#live tr.running").all_inner_texts())
                cells = page.locator("#runs-table tr.run td:nth-child(7)").all_inner_texts()
                if cells and (not seen_attempts or seen_attempts[-1] != cells[0]):
                    seen_attempts.append(cells[0])
                    if cells[0] == "1":
                        shot(page, "real-run-live")
                time.sleep(0.2)
            output = proc.communicate(timeout=60)[0]
        finally:
            if proc.poll() is None:
                proc.kill()
        row = page.locator("#runs-table tr.run")
        expect(row).to_contain_text("finished", timeout=20_000)
        expect(row).to_contain_text("0.0%")  # sleeping fixes nothing: both TESTS_FAILED
        inert(page)
        page.goto(f"{url}/_view/search?q=sleep+2&in=command")
        expect(page.locator("#hits-table tr.hit")).to_have_count(4)  # 2 commands x 2 tasks
        inert(page)
    assert proc.returncode == 1, output[-3000:]
    agent_rows = [r for r in seen_running if "\tagent\t" in r and "\trun\t" in r]
    assert agent_rows, (seen_running, output[-2000:])  # a running attempt, its phase and tool
    assert "1" in seen_attempts, seen_attempts  # the first attempt listed before the run ended
    assert problems == [], problems
