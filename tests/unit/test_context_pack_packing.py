"""context_packer's packing under a token budget (hand-computed), the plan's priorities and
exclusions, and context_manifest.json's format."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_agentbench.agents import llm_v0
from pytest_agentbench.agents.context_pack.manifest import manifest, pack_entry, write_manifest
from pytest_agentbench.agents.context_pack.packing import (
    CHARS_PER_TOKEN,
    PackCandidate,
    Source,
    estimate_tokens,
    pack,
    render_packed,
    render_range,
)
from pytest_agentbench.agents.context_pack.plan import PlanParams, plan
from pytest_agentbench.agents.context_pack.traceback_refs import (
    FailingTest,
    FailureRefs,
    Frame,
)

NINE = "x" * 9
M = Source("m.py", tuple(NINE for _ in range(9)), 9)


def test_the_estimate_is_llm_v0s() -> None:
    assert CHARS_PER_TOKEN == llm_v0.CHARS_PER_TOKEN == 4
    assert [estimate_tokens("a" * n) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]


def test_a_rendered_range_costs_what_the_hand_count_says() -> None:
    # header "m.py (lines 3-6):\n" 18 + "```python\n" 10 + 4 lines of 9 and 3 newlines 39
    # + "\n```\n" 5 = 72 characters = 18 tokens; n lines: 32 + 10n characters
    text = render_range("m.py", 3, 6, M.lines)
    assert len(text) == 72 and estimate_tokens(text) == 18


def test_pack_in_order_clips_duplicates_and_stops_at_the_budget() -> None:
    candidates = [
        PackCandidate("m.py", "frame", 3, 6),          # 4 lines: 72 chars, 18 tokens
        PackCandidate("m.py", "inside", 4, 5),         # all included already
        PackCandidate("m.py", "around", 1, 9),         # new: 1-2 (52 chars, 13), 7-9 (62, 16)
        PackCandidate("m.py", "one line", 8, 8),       # 42 chars, 11 tokens
        PackCandidate("gone.py", "missing", excluded="not in workspace"),
    ]
    packed = pack(candidates, {"m.py": M}, budget_tokens=35)
    rows = [(i.start_line, i.end_line, i.included, i.reason, i.tokens) for i in packed.items]
    assert rows == [
        (3, 6, True, "frame", 18),
        (4, 5, False, "duplicate range (already included): inside", 13),
        (1, 2, True, "around", 13),
        (7, 9, False, "over budget (16 tokens, 4 left): around", 16),
        (8, 8, False, "over budget (11 tokens, 4 left): one line", 11),
        (None, None, False, "not in workspace", 0),
    ]
    assert packed.used_tokens == 31 <= packed.budget_tokens
    assert (len(packed.included), len(packed.excluded)) == (2, 4)
    # the model sees the file's ranges in line order
    text = render_packed(packed)
    assert text.index("(lines 1-2)") < text.index("(lines 3-6)")
    assert estimate_tokens(text) <= packed.used_tokens + 1


def test_a_zero_budget_includes_nothing() -> None:
    packed = pack([PackCandidate("m.py", "frame", 1, 2)], {"m.py": M}, 0)
    assert packed.used_tokens == 0 and packed.items[0].reason.startswith("over budget")
    assert render_packed(packed) == ""


def test_signatures_when_the_whole_file_is_over_budget() -> None:
    lines = ("import os", "", "def f(a):", "    return a", "", "class C:",
             "    def g(self):", "        pass")
    src = Source("s.py", lines, 8)
    packed = pack([PackCandidate("s.py", "imported"),
                   PackCandidate("s.py", "imported: signatures only", signatures=True)],
                  {"s.py": src}, budget_tokens=27)
    whole, sigs = packed.items
    # whole: header 18 + fence 10 + 66 characters in 8 lines and 7 newlines + 5 = 106 chars,
    # 27 tokens: it fits a budget of exactly 27
    assert whole.included and whole.tokens == 27
    assert not sigs.included and sigs.reason.startswith("duplicate range")
    packed = pack([PackCandidate("s.py", "imported"),
                   PackCandidate("s.py", "imported: signatures only", signatures=True)],
                  {"s.py": src}, budget_tokens=26)
    whole, sigs = packed.items
    assert not whole.included and whole.reason.startswith("over budget (27 tokens, 26 left)")
    assert sigs.included and (sigs.start_line, sigs.end_line) == (1, 8)
    assert "3: def f(a):" in sigs.text and "7:     def g(self):" in sigs.text
    assert "return a" not in sigs.text


# -- the plan: priorities and exclusions ---------------------------------------------------------
def source(path: str, text: str) -> Source:
    return Source.from_text(path, text)


LONG = "import helper\n\nLIMIT = 3\n\n\ndef big(x):\n" + "    x += 1\n" * 200 + "    return x\n"
FILES = {
    "pkg/core.py": LONG,
    "pkg/helper.py": "def h():\n    return 1\n",
    "helper.py": "def top():\n    return 2\n",
    "tests/test_core.py": "from pkg.core import big\n\n\ndef test_big():\n    assert big(1) == 0\n",
}


def run_plan(refs: FailureRefs, budget: int, **params: int):  # type: ignore[no-untyped-def]
    reads: list[str] = []

    def read(path: str) -> Source | None:
        reads.append(path)
        return source(path, FILES[path]) if path in FILES else None

    candidates, sources = plan(refs, set(FILES), read, PlanParams(**params))
    return pack(candidates, sources, budget), reads


def test_a_long_function_gets_a_window_and_a_narrow_fallback() -> None:
    refs = FailureRefs(frames=[Frame("/usr/lib/python3.11/json/decoder.py", 9),
                               Frame("/usr/lib/python3.11/site-packages/x/y.py", 3),
                               Frame("other/gone.py", 2), Frame("tests/test_core.py", 5),
                               Frame("pkg/core.py", 100)],
                       test_ids=[FailingTest("tests/test_core.py", "test_big")],
                       test_files=["tests/test_core.py"])
    packed, reads = run_plan(refs, budget=150)
    rows = [(i.path, i.start_line, i.end_line, i.included, i.reason) for i in packed.items]
    # deepest frame first: its ±30 window (61 lines of 10 chars: ~160 tokens) is over budget,
    # the ±8 fallback inside it fits
    assert rows[0][:4] == ("pkg/core.py", 70, 130, False)
    assert rows[0][4].startswith("over budget") and rows[0][4].endswith("±30 lines")
    assert rows[1] == ("pkg/core.py", 92, 108, True, "traceback frame (line 100): ±8 lines")
    assert ("/usr/lib/python3.11/site-packages/x/y.py", None, None, False,
            "site-packages (traceback frame, line 3)") in rows
    assert ("/usr/lib/python3.11/json/decoder.py", None, None, False,
            "standard library (traceback frame, line 9)") in rows
    assert ("other/gone.py", None, None, False,
            "not in workspace (traceback frame, line 2)") in rows
    test_rows = [r for r in rows if r[0] == "tests/test_core.py"]
    assert test_rows[0] == ("tests/test_core.py", 4, 5, True,
                            "traceback frame (line 5): whole function")
    assert test_rows[1][3:] == (False, "duplicate range (already included): failing test "
                                "tests/test_core.py::test_big")
    # `import helper` in pkg/core.py is the top-level helper.py; pkg/helper.py is not read
    assert any(r[0] == "helper.py" and r[3] for r in rows)
    assert "pkg/helper.py" not in reads and "other/gone.py" not in reads
    assert packed.used_tokens <= 150


def test_missing_module_and_its_package() -> None:
    FILES["pkg/__init__.py"] = "from .core import big\n"
    try:
        refs = FailureRefs(frames=[Frame("tests/test_core.py", 1)],
                           test_files=["tests/test_core.py"], missing_modules=["pkg.slug"])
        packed, _ = run_plan(refs, budget=6000)
    finally:
        del FILES["pkg/__init__.py"]
    rows = [(i.path, i.included, i.reason) for i in packed.items]
    assert ("pkg/slug.py", False, "not in workspace (missing module pkg.slug)") in rows
    assert ("pkg/__init__.py", True, "package of the missing module pkg.slug") in rows
    assert [r for r in rows if r[0] == "pkg/slug.py"] == [rows[rows.index(
        ("pkg/slug.py", False, "not in workspace (missing module pkg.slug)"))]]


# -- the manifest --------------------------------------------------------------------------------
def test_manifest_format(tmp_path: Path) -> None:
    packed = pack([PackCandidate("m.py", "traceback frame (line 4)", 3, 6),
                   PackCandidate("x.py", "r", excluded="not in workspace")], {"m.py": M}, 6000)
    path = write_manifest(tmp_path / "agent", manifest("context_packer", 6000,
                                                       [pack_entry(1, packed)]))
    assert path == tmp_path / "agent" / "context_manifest.json"
    assert [p.name for p in path.parent.iterdir()] == ["context_manifest.json"]
    assert json.loads(path.read_text()) == {
        "version": 1, "agent": "context_packer", "budget_tokens": 6000, "chars_per_token": 4,
        "packs": [{"step": 1, "used_tokens": 18, "items": [
            {"path": "m.py", "start_line": 3, "end_line": 6, "included": True,
             "reason": "traceback frame (line 4)", "tokens": 18},
            {"path": "x.py", "start_line": None, "end_line": None, "included": False,
             "reason": "not in workspace", "tokens": 0}]}]}
