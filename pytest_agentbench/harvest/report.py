"""The harvest's funnel: every walked commit accounted for with exactly one reason, as
`harvest_report.json` and `harvest_report.md`."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pytest_agentbench.harvest.state import Outcome

# the stages a commit goes through, and the reasons each one drops for
FUNNEL = [
    ("filter", "cheap filters (no run)", ("ROOT_COMMIT", "BOT", "REVERT", "RELEASE",
                                          "EMPTY_CHANGE", "DOCS_CI_PACKAGING_ONLY",
                                          "NO_TEST_PART", "NO_SOURCE_PART", "NO_PYTHON_TESTS",
                                          "TOO_LARGE", "UNREADABLE_CHANGE", "DUPLICATE_FIX")),
    ("setup", "environment", ("SETUP_FAILED", "SANDBOX_ERROR", "CHECKOUT_FAILED",
                              "TESTS_PATCH_FAILED", "FIX_PATCH_FAILED", "HARNESS_ERROR")),
    ("tests", "FAIL_TO_PASS found and stable", ("TESTS_NOT_RUN", "NO_FAIL_TO_PASS",
                                                 "FLAKY_TESTS", "TOO_MANY_TESTS")),
    ("gate", "oracle passes, nop fails", ("GATE_ORACLE_FAILED", "GATE_NOP_PASSED",
                                          "GATE_EXPLOIT_PASSED", "TASK_INVALID")),
]


def build(outcomes: list[Outcome], meta: dict[str, Any]) -> dict[str, Any]:
    reasons = Counter(o.reason for o in outcomes)
    left, stages = len(outcomes), []
    for stage, title, dropped_for in FUNNEL:
        drops = {r: reasons[r] for r in dropped_for if reasons[r]}
        seconds = sum(o.stage_seconds.get(stage, 0.0) for o in outcomes)
        left -= sum(drops.values())
        stages.append({"stage": stage, "title": title, "dropped": drops, "left": left,
                       "seconds": round(seconds, 1)})
    known = {r for _, _, rs in FUNNEL for r in rs} | {"VALIDATED"}
    validated = [o for o in outcomes if o.reason == "VALIDATED"]
    return {
        **meta,
        "walked": len(outcomes),
        "funnel": stages,
        "unexpected_reasons": {r: n for r, n in reasons.items() if r not in known},
        "validated": len(validated),
        "validated_by_kind": dict(Counter(o.kind or "bugfix" for o in validated)),
        "setups_run": sum(o.setup_ran for o in outcomes),
        "candidates": sum(1 for o in outcomes if o.stage not in ("filter",)),
        "commits": [asdict(o) for o in outcomes],
    }


def write(report: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    json_path, md_path = out_dir / "harvest_report.json", out_dir / "harvest_report.md"
    json_path.write_text(json.dumps(report, indent=2) + "\n", "utf-8")
    md_path.write_text(markdown(report), "utf-8")
    return json_path, md_path


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Harvest of {report.get('source')} into suite {report.get('suite')}", "",
             f"{report['walked']} first-parent commits walked ({report.get('range')}), "
             f"{report['candidates']} candidates, {report['setups_run']} setups run, "
             f"**{report['validated']} validated tasks** {report['validated_by_kind']}, "
             f"in {report.get('wall_sec', 0):.0f} s "
             f"({report.get('candidates_per_minute', 0):.1f} candidates per minute).", "",
             "| stage | dropped | left | time (s) |", "|---|---|---|---|",
             f"| walked | | {report['walked']} | |"]
    for stage in report["funnel"]:
        drops = ", ".join(f"{r} {n}" for r, n in sorted(stage["dropped"].items())) or "-"
        lines.append(f"| {stage['title']} | {drops} | {stage['left']} | {stage['seconds']} |")
    if report["unexpected_reasons"]:
        lines += ["", f"Other reasons: {report['unexpected_reasons']}"]
    return "\n".join(lines) + "\n"
