"""The markdown reports say "none" where a table has no rows (issue 22 polish): a header row
with nothing under it reads as a broken report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest_agentbench.reporting.render as render
from pytest_agentbench.reporting.compare import compare_runs
from pytest_agentbench.reporting.compare_render import compare_markdown
from pytest_agentbench.reporting.load import load_run
from pytest_agentbench.reporting.md import EMPTY, table
from pytest_agentbench.reporting.paired import compare
from pytest_agentbench.reporting.summary import summarize
from tests.support.synthetic import make_record, write_run

HEADER_ONLY = re.compile(r"^\|[^\n]*\|\n\|(?:---\|)+\n(?!\|)", re.MULTILINE)


def all_passing(tmp_path: Path, name: str) -> Path:
    records = [make_record(f"run-{name}", f"t{i}", "s", name, 0, 1, True, None, steps=2,
                           duration=3.0) for i in range(3)]
    return write_run(tmp_path / name, records, variant=name, run_id=f"run-{name}")


def test_a_table_without_rows_says_none() -> None:
    assert table(["a", "b"], []) == EMPTY == "_none_"
    assert table(["a"], [[1]]).splitlines() == ["| a |", "|---|", "| 1 |"]


def test_no_report_shows_a_header_without_rows(tmp_path: Path) -> None:
    a, b = load_run(all_passing(tmp_path, "a")), load_run(all_passing(tmp_path, "b"))
    summary_md = render.render_summary(summarize(a), "md")
    paired_md = render.render_paired(compare(a, b, seed=1), "md")
    compare_md = compare_markdown(compare_runs([a, b]))
    for name, text in (("summary", summary_md), ("paired", paired_md),
                       ("compare", compare_md)):
        assert not HEADER_ONLY.search(text + "\n"), f"{name}: {HEADER_ONLY.search(text)}"
    signatures = summary_md.split("## Most common failure signatures", 1)[1]
    assert signatures.lstrip().startswith(EMPTY)
