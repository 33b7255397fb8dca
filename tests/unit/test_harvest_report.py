"""The harvest's funnel report (harvest/report.py): every walked commit is in it once, with one
reason, and the stage counts add up."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_agentbench.harvest.report import FUNNEL, build, write
from pytest_agentbench.harvest.state import Outcome

STAGE_OF = {reason: stage for stage, _, reasons in FUNNEL for reason in reasons}


def outcomes() -> list[Outcome]:
    """One commit per known reason, three validated ones (a feature among them)."""
    made = [Outcome(f"{i:040x}", reason, STAGE_OF[reason], 1.0, setup_ran=stage == "setup",
                    stage_seconds={STAGE_OF[reason]: 1.0})
            for i, (reason, stage) in enumerate(STAGE_OF.items())]
    made += [Outcome(f"{100 + i:040x}", "VALIDATED", "done", 2.0, f"s-{i}", kind,
                     setup_ran=i == 0, stage_seconds={"tests": 1.0, "gate": 0.5})
             for i, kind in enumerate(["bugfix", "bugfix", "feature"])]
    return made


def test_every_commit_once_and_the_funnel_adds_up() -> None:
    report = build(outcomes(), {"source": "/src", "suite": "s"})
    walked = len(outcomes())
    assert report["walked"] == walked == len({c["sha"] for c in report["commits"]})
    lefts = [stage["left"] for stage in report["funnel"]]
    assert lefts == sorted(lefts, reverse=True) and lefts[-1] == report["validated"] == 3
    dropped = [n for stage in report["funnel"] for n in stage["dropped"].values()]
    assert sum(dropped) + report["validated"] == walked and set(dropped) == {1}
    assert report["unexpected_reasons"] == {}
    assert report["validated_by_kind"] == {"bugfix": 2, "feature": 1}
    setup_stage = len(FUNNEL[1][2])
    assert report["setups_run"] == setup_stage + 1
    assert report["candidates"] == walked - len(FUNNEL[0][2])
    assert report["funnel"][2]["seconds"] == len(FUNNEL[2][2]) + 3.0


def test_a_reason_outside_the_funnel_is_shown_not_lost() -> None:
    made = [*outcomes(), Outcome("f" * 40, "SOMETHING_NEW", "tests")]
    report = build(made, {})
    assert report["unexpected_reasons"] == {"SOMETHING_NEW": 1}
    assert report["funnel"][-1]["left"] == report["validated"] + 1
    assert report["walked"] == len(made)


def test_json_and_markdown_are_written(tmp_path: Path) -> None:
    report = build(outcomes(), {"source": "/src", "suite": "s", "range": "HEAD",
                                "wall_sec": 60.0, "candidates_per_minute": 2.5})
    json_path, md_path = write(report, tmp_path)
    assert json.loads(json_path.read_text())["walked"] == report["walked"]
    md = md_path.read_text()
    assert f"{report['walked']} first-parent commits walked" in md
    assert "**3 validated tasks**" in md and "2.5 candidates per minute" in md
    assert "| cheap filters (no run) | BOT 1, DOCS_CI_PACKAGING_ONLY 1," in md
