"""HTML polish (issue 22): the compare chart keeps its labels inside, model requests and tool
calls share one step counter, "unbounded" in the cost card is explained, numeric headers align
with their numbers and the index keeps ids and dates on one line. The browser test
(tests/e2e/test_html_browser.py) checks the same pages as rendered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_agentbench.reporting.html.run_page import UNBOUNDED_NOTE, run_cards
from pytest_agentbench.reporting.html.svg import frontier_chart
from pytest_agentbench.reporting.html.timeline import spans, step_numbers
from pytest_agentbench.reporting.load import load_run
from pytest_agentbench.reporting.summary import summarize
from tests.support.synthetic import make_record, write_run

TEMPLATES = (Path(__file__).resolve().parents[2] / "pytest_agentbench" / "reporting" / "html"
             / "templates")


def _extent(shape: dict[str, Any]) -> tuple[float, float, float]:
    """(left, right, top) of a text shape, at about 0.62 em per character."""
    x, y, size = float(shape["x"]), float(shape["y"]), float(shape.get("size", 11))
    w = len(str(shape["text"])) * size * 0.62
    left = {"start": x, "middle": x - w / 2, "end": x - w}[shape.get("anchor", "start")]
    return left, left + w, y - size


def test_the_frontier_chart_keeps_every_label_inside() -> None:
    """A run at 100% had its name above the chart's top edge; a long name at the dearest point
    ran past the right edge."""
    chart = frontier_chart([
        {"name": "a-very-long-variant-name-xx", "cost": 2.0, "rate": 1.0, "ci_low": 0.8,
         "ci_high": 1.0, "frontier": True},
        {"name": "cheap", "cost": 0.1, "rate": 1.0, "ci_low": 0.7, "ci_high": 1.0,
         "frontier": True},
        {"name": "zero", "cost": 0.5, "rate": 0.0, "ci_low": 0.0, "ci_high": 0.3,
         "frontier": False},
    ], "cost per attempt (USD)")
    assert chart is not None
    for shape in chart["shapes"]:
        if shape["k"] == "text" and not shape.get("rotate"):
            left, right, top = _extent(shape)
            assert left >= 0 and right <= chart["width"] and top >= 0, shape
            assert float(shape["y"]) <= chart["height"], shape


EVENTS = [  # turn 1: a model request and two tool calls; turn 2: a model request and one call
    ("llm_request", {"step": 1}), ("llm_response", {"step": 1}),
    ("tool_call_started", {"step": 1, "tool": "read_file"}),
    ("tool_call_finished", {"step": 1, "tool": "read_file", "ok": True}),
    ("tool_call_started", {"step": 2, "tool": "run"}),
    ("tool_call_finished", {"step": 2, "tool": "run", "ok": True}),
    ("llm_request", {"step": 2}), ("llm_response", {"step": 2}),
    ("tool_call_started", {"step": 3, "tool": "apply_patch"}),
    ("tool_call_finished", {"step": 3, "tool": "apply_patch", "ok": True}),
]


def test_model_requests_and_tool_calls_share_one_step_counter() -> None:
    events = [{"type": t, "seq": i, "mono_ms": 100 * i, **extra}
              for i, (t, extra) in enumerate(EVENTS)]
    labels = [s[0] for s in spans(events)]
    assert labels == ["step 1: model", "step 2: read_file", "step 3: run", "step 4: model",
                      "step 5: apply_patch"]
    assert step_numbers(events)[("tool", 3)] == 5


def test_an_unbounded_cost_per_pass_is_explained(tmp_path: Path) -> None:
    records = [make_record("r", f"t{i}", "s", "v", 0, 1, i == 0, None if i == 0 else
                           "TESTS_FAILED", steps=2, duration=1.0) for i in range(40)]
    for r in records:
        r["usage"] = {**(r.get("usage") or {}), "cost_usd": 0.01, "total_tokens": 100}
    run = load_run(write_run(tmp_path / "run", records, variant="v", run_id="r"))
    summary = summarize(run)
    assert summary.data["usage"]["cost_per_pass"]["ci_high"] is None  # one pass in 40 tasks
    cards, _ = run_cards(run, summary.data)
    cost = next(c for c in cards if c["key"] == "cost")
    assert "unbounded" in cost["sub"] and cost["note"] == UNBOUNDED_NOTE


def test_numeric_headers_are_aligned_as_their_numbers_and_index_cells_do_not_wrap() -> None:
    paired = (TEMPLATES / "paired.html.j2").read_text()
    assert '<th class="num">A passed</th><th class="num">B passed</th>' in paired
    index = (TEMPLATES / "index.html.j2").read_text()
    assert '<td class="nowrap"><a href="{{ r.href }}">' in index
    assert '<td class="nowrap">{{ r.started }}</td>' in index
