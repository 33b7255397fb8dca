"""The paired, compare and index pages and their commands (called directly, as reporting/cli.py
will once it calls `add_html_commands`)."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from pytest_agentbench.reporting.html import cli as html_cli
from pytest_agentbench.reporting.html.index import CACHE_FILE, write_index
from pytest_agentbench.reporting.html.pages import render_paired_html
from pytest_agentbench.reporting.load import load_runs
from pytest_agentbench.reporting.paired import compare
from tests.support.synthetic import make_record, write_run


def _run(root: Path, name: str, fails: set[int], steps: int = 3, variant: str = "") -> Path:
    recs = [make_record(f"run-{name}", f"t{i}", "s", variant or name, a, 2,
                        (i, a) not in fails, "TESTS_FAILED" if (i, a) in fails else None,
                        steps=steps, duration=5.0) for i in range(5) for a in range(2)]
    return write_run(root / name, recs, variant=variant or name, run_id=f"run-{name}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    kinds = parser.add_subparsers(dest="kind")
    html_cli.add_html_commands(kinds)
    return parser


def test_paired_grid_discordant_first_with_relative_links(tmp_path: Path) -> None:
    a = _run(tmp_path / "out", "a", {(3, 0), (3, 1), (4, 1)})
    b = _run(tmp_path / "out", "b", {(0, 0), (3, 0), (3, 1)})
    ra, rb = load_runs([a, b])
    page = render_paired_html(compare(ra, rb, resamples=100), tmp_path / "pages" / "p.html")
    order = re.findall(r'data-task="(t\d)"', page)
    assert order[:2] == ["t0", "t4"]  # the discordant tasks first, then by id
    assert sorted(order[2:]) == order[2:] == ["t1", "t2", "t3"]
    assert 'href="../out/a/report.html#task-t4"' in page
    assert 'href="../out/b/report.html#task-t0"' in page
    assert 'class="pair-task none-pass"' in page  # t3: neither passes on both attempts
    assert "Minimum detectable effect" in page and "clustered McNemar" in page
    assert "not shown: large-sample test" in page  # 2 tasks differ: hidden, and why


def test_paired_page_tolerates_absent_power_and_task_level(tmp_path: Path) -> None:
    ra, rb = load_runs([_run(tmp_path, "a", {(1, 0)}), _run(tmp_path, "b", set())])
    report = compare(ra, rb, resamples=100)
    report.data["power"] = {"mde": 0.123456, "alpha": 0.05}
    report.data.pop("task_level", None)
    page = render_paired_html(report, tmp_path / "p.html")
    assert "Power and task-level" in page and "12.3 pts" in page
    assert "Task level" not in page
    report.data.pop("power")
    assert "Power and task-level" not in render_paired_html(report, tmp_path / "p.html")


def test_index_lists_runs_and_caches_figures(tmp_path: Path) -> None:
    root = tmp_path / "out"
    _run(root, "a", {(0, 0)})
    _run(root, "b", set(), variant="<script>x</script>")
    (root / "b" / "report.html").write_text("x")
    (root / "not-a-run").mkdir()
    page = write_index(root).read_text()
    assert page.count('class="run-row"') == 2
    assert 'href="b/report.html"' in page and 'href="a/report.html"' in page
    assert page.count("(report.html not written yet)") == 1  # a (still running, or stopped)
    assert "90.0%" in page and "100.0%" in page
    assert "<script>x</script>" not in page and "&lt;script&gt;x" in page
    cache = json.loads((root / CACHE_FILE).read_text())
    assert set(cache["runs"]) == {"a", "b"}
    cache["runs"]["a"]["figures"]["rate"] = 0.5  # a cache hit is used as is ...
    (root / CACHE_FILE).write_text(json.dumps(cache))
    assert "50.0%" in write_index(root).read_text()
    with (root / "a" / "attempts.jsonl").open("a") as fh:  # ... until attempts.jsonl changes
        fh.write(json.dumps(make_record("run-a", "t9", "s", "a", 0, 1, True, None, 3, 1.0))
                 + "\n")
    assert "50.0%" not in write_index(root).read_text()
    assert not list(root.glob(".index.html.*.tmp"))


def test_commands_write_the_pages(tmp_path: Path, capsys) -> None:
    root = tmp_path / "out"
    _run(root, "a", {(3, 0)})
    _run(root, "b", {(1, 1)}, steps=5)
    parser = _parser()
    args = parser.parse_args(["index", str(root)])
    assert args.func(args) == 0 and (root / "index.html").is_file()
    out = tmp_path / "p.html"
    args = parser.parse_args(["paired-html", "--run-a", str(root / "a"), "--run-b",
                              str(root / "b"), "--resamples", "100", "-o", str(out)])
    assert args.func(args) == 0 and "Paired: A a vs B b" in out.read_text()
    out = tmp_path / "c.html"
    args = parser.parse_args(["compare-html", str(root / "a"), str(root / "b"), "--resamples",
                              "100", "-o", str(out)])
    assert args.func(args) == 0
    text = out.read_text()
    assert "on frontier" in text and 'class="point frontier"' in text
    args = parser.parse_args(["index", str(tmp_path / "nowhere")])
    assert args.func(args) == 2
    assert "no such output root" in capsys.readouterr().err


def test_run_end_writes_the_output_roots_index(tmp_path: Path) -> None:
    from pytest_agentbench.run.finish import write_runs_index

    root = tmp_path / "out"
    run = _run(root, "a", set())
    _run(root, "b", {(0, 0)})
    path = write_runs_index(run)
    assert path == root.resolve() / "index.html"
    assert path.read_text().count('class="run-row"') == 2


def test_run_page_links_the_index_the_plugin_writes_next(tmp_path: Path) -> None:
    from pytest_agentbench.reporting.html.run_page import write_html

    root = tmp_path / "out"
    _run(root, "a", {(0, 0)})
    assert 'href="../index.html"' not in write_html(root / "a").read_text()  # no index yet
    assert 'href="../index.html"' in write_html(root / "a", link_index=True).read_text()
    page = write_index(root).read_text()  # then the index: the run's page is there
    assert "(report.html not written yet)" not in page


def test_index_writers_take_turns(tmp_path: Path) -> None:
    import threading

    root = tmp_path / "out"
    for name in ("a", "b", "c"):
        _run(root, name, {(0, 0)})
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(5):
                write_index(root)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert (root / "index.html").read_text().count('class="run-row"') == 3
    assert json.loads((root / CACHE_FILE).read_text())["runs"].keys() == {"a", "b", "c"}
