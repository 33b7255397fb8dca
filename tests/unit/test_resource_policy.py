"""Resources as a treatment: runs made under different resource policies are refused by
`report paired`, `report compare` and `gate` with one line naming the field, unless
`--allow-resource-difference`; the reports then say so; `report compare` over runs at several
`--agentbench-resources-scale` shows the pass rate per scale."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pytest_agentbench.reporting.cli as cli
from pytest_agentbench.reporting.compare import compare_runs
from pytest_agentbench.reporting.compare_render import render_compare
from pytest_agentbench.reporting.html.pages import render_compare_html, render_paired_html
from pytest_agentbench.reporting.load import load_run, load_runs
from pytest_agentbench.reporting.paired import compare
from pytest_agentbench.reporting.render import paired_markdown
from pytest_agentbench.reporting.resources import ResourceDifference
from tests.support.synthetic import LIMITS, make_record, write_run

TASKS = 6
REFUSAL = ("agentbench: runs differ in limits.mem_limit_mb (4096 vs 2048 on 6 of 6 tasks, e.g. "
           "t0): pass --allow-resource-difference to compare them")


def _run(root: Path, name: str, passes: int, *, scale: float | None = None,
         cpu: float = 2.0, mem: int = 4096, oom: int = 0, **limits: Any) -> Path:
    """A run of TASKS tasks, the first `passes` passing; its limits as written (`scale` None:
    a record written before the resource fields)."""
    records = []
    for i in range(TASKS):
        ok = i < passes
        rec = make_record(f"run-{name}", f"t{i}", "s", name, 0, 1, ok,
                          None if ok else "TESTS_FAILED", steps=3, duration=5.0)
        rec["limits"] = {**LIMITS, "cpu_limit": cpu, "mem_limit_mb": mem}
        if scale is not None:
            rec["limits"].update(resources_scale=scale, pids_limit=512, disk_limit_mb=2048,
                                 mem_reservation_mb=None, oom_kills=oom if not ok else 0)
        rec["limits"].update(limits)
        records.append(rec)
    return write_run(root / name, records, variant=name)


def test_paired_refuses_a_memory_difference_in_one_line(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    a = _run(tmp_path, "a", 5, scale=1.0, mem=4096)
    b = _run(tmp_path, "b", 3, scale=0.5, cpu=2.0, mem=2048)
    with pytest.raises(ResourceDifference):
        compare(load_run(a), load_run(b))
    code = cli.main(["report", "paired", "--run-a", str(a), "--run-b", str(b)])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == REFUSAL
    # --allow-mismatch limits (the budgets) does not accept it: resources are a field of their own
    assert cli.main(["report", "paired", "--run-a", str(a), "--run-b", str(b),
                     "--allow-mismatch", "limits"]) == 2
    assert capsys.readouterr().err.strip() == REFUSAL


def test_the_override_compares_them_and_the_reports_say_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _run(tmp_path, "a", 5, scale=1.0, mem=4096)
    b = _run(tmp_path, "b", 3, scale=0.5, mem=2048)
    code = cli.main(["report", "paired", "--run-a", str(a), "--run-b", str(b),
                     "--allow-resource-difference"])
    text = capsys.readouterr().out
    assert code == 0
    assert ("different resource policies, compared as asked (--allow-resource-difference): "
            "limits.mem_limit_mb 4096 vs 2048 on 6 of 6 tasks, e.g. t0. A difference in pass "
            "rate may come from the resources.") in text  # whole, never cut as a table cell
    report = compare(load_run(a), load_run(b), allow_mismatch=["resources"])
    diffs = report.data["pairing"]["resource_differences"]
    assert [(d["field"], d["a"], d["b"], d["tasks"]) for d in diffs] == [
        ("limits.mem_limit_mb", 4096, 2048, 6)]
    assert report.data["pairing"]["allowed_mismatches"] == {"resources": 6}
    html = render_paired_html(report, tmp_path / "p.html")
    assert "limits.mem_limit_mb 4096 vs 2048" in html
    # the gate: refused, then with the override a verdict whose report says it
    gate = ["gate", "--baseline", str(a), "--candidate", str(b)]
    assert cli.main(gate) == 2 and capsys.readouterr().err.strip() == REFUSAL
    assert cli.main([*gate, "--allow-resource-difference"]) in (0, 1, 3)
    assert "limits.mem_limit_mb 4096 vs 2048" in capsys.readouterr().out


def test_same_policy_pairs_and_unknown_values_never_differ(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", 5, scale=1.0)
    b = _run(tmp_path, "b", 4, scale=1.0)
    old = _run(tmp_path, "old", 4)  # no pids, disk, reservation, scale: unknown, not different
    assert compare(load_run(a), load_run(b)).data["pairing"]["resource_differences"] == []
    assert compare(load_run(a), load_run(old)).data["pairs"] == TASKS
    pids = _run(tmp_path, "pids", 4, scale=1.0)
    lines = (pids / "attempts.jsonl").read_text().splitlines()
    recs = [json.loads(line) for line in lines]
    recs[2]["limits"]["pids_limit"] = 128
    (pids / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(ResourceDifference, match=r"^runs differ in limits.pids_limit \(512 vs "
                                                 r"128 on 1 of 6 tasks, e\.g\. t2\): pass"):
        compare(load_run(a), load_run(pids))
    crashed = _run(tmp_path, "crashed", 4, scale=0.5, mem=2048)  # one attempt is the infra
    recs = [json.loads(line) for line in (crashed / "attempts.jsonl").read_text().splitlines()]
    recs = [r if r["task_id"] != "t0" else {  # record of a dead worker: the run's limits unknown
        **r, "result": {**r["result"], "passed": False, "failure_reason": "SANDBOX_ERROR"},
        "limits": {**r["limits"], "mem_limit_mb": 4096, "resources_scale": 1.0}} for r in recs]
    (crashed / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(ResourceDifference, match=r"\(4096 vs 2048 on 5 of 5 tasks, e\.g\. t1\)"):
        compare(load_run(a), load_run(crashed))
    reserved = _run(tmp_path, "reserved", 4, scale=1.0, mem_reservation_mb=1024)
    with pytest.raises(ResourceDifference, match=r"limits.mem_reservation_mb \(none vs 1024"):
        compare(load_run(a), load_run(reserved))


def test_compare_refuses_then_shows_the_sensitivity_per_scale(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    full = _run(tmp_path, "full", 6, scale=1.0, cpu=2.0, mem=4096)
    half = _run(tmp_path, "half", 4, scale=0.5, cpu=1.0, mem=2048, oom=1)
    quarter = _run(tmp_path, "quarter", 1, scale=0.25, cpu=0.5, mem=1024, oom=2)
    args = ["report", "compare", str(full), str(half), str(quarter)]
    assert cli.main(args) == 2
    assert capsys.readouterr().err.strip() == (
        "agentbench: runs differ in limits.cpu_limit (2 vs 1 on 6 of 6 tasks, e.g. t0) and in "
        "limits.mem_limit_mb: pass --allow-resource-difference to compare them")
    assert cli.main([*args, "--allow-resource-difference"]) == 0
    text = capsys.readouterr().out
    assert "## Resource sensitivity" in text
    assert "| 0.25 | 1 | 0.50 | 1,024 | 6 | 16.7% |" in text
    assert "| 0.5 | 1 | 1.00 | 2,048 | 6 | 66.7% |" in text
    assert "| 1 | 1 | 2.00 | 4,096 | 6 | 100.0% |" in text
    report = compare_runs(load_runs([full, half, quarter], fields="all"),
                          allow_mismatch=["resources"])
    rows = report.data["resource_sensitivity"]
    assert [(r["scale"], r["passed"], r["scored"], r["oom_kills"]) for r in rows] == [
        (0.25, 1, 6, 10), (0.5, 4, 6, 2), (1.0, 6, 6, 0)]
    assert "limits.cpu_limit 2 vs 1" in render_compare(report, "md")
    html = render_compare_html(report, tmp_path / "c.html")
    assert 'id="resource-sensitivity"' in html and "limits.cpu_limit 2 vs 1" in html


def test_the_compare_page_shows_the_task_signal(tmp_path: Path) -> None:
    """Per task its pass rate per variant and signal, as `report tasks` gives them."""
    good, bad = _run(tmp_path, "good", 5, scale=1.0), _run(tmp_path, "bad", 2, scale=1.0)
    report = compare_runs(load_runs([good, bad], fields="all"))
    html = render_compare_html(report, tmp_path / "c.html")
    assert 'id="task-signal"' in html
    row = html[html.index('data-task="t3"'):]
    row = row[:row.index("</tr>")]
    assert "1/1 (100.0%)" in row and "0/1 (0.0%)" in row and "discriminating" in row
    assert "Never passed: t5." in html and "Always passed: t0, t1." in html


def test_one_scale_has_no_sensitivity_table(tmp_path: Path) -> None:
    runs = load_runs([_run(tmp_path, "a", 5, scale=1.0), _run(tmp_path, "b", 4)], fields="all")
    report = compare_runs(runs)
    assert report.data["resource_sensitivity"] == []
    assert "Resource" not in render_compare(report, "md")
    assert paired_markdown(compare(runs[0], runs[1]).data).count("resource") == 0


def test_the_run_summary_says_what_the_attempts_ran_under(tmp_path: Path) -> None:
    from pytest_agentbench.reporting.summary import write_summary

    text = write_summary(_run(tmp_path, "half", 2, scale=0.5, cpu=1.0, mem=2048, oom=1)) \
        .read_text("utf-8")
    section = text.split("## Resources", 1)[1].split("\n## ", 1)[0]
    for row in ("| limits.cpu_limit | 1 |", "| limits.mem_limit_mb | 2048 |",
                "| limits.mem_reservation_mb | none |", "| limits.pids_limit | 512 |",
                "| limits.disk_limit_mb | 2048 |", "| resources scale | 0.5 |",
                "| OOM kills | 4 |"):  # the four failing attempts met one each
        assert row in section, section
    assert "What the 6 attempts' sandboxes ran under" in section
    # records written before the policy fields: no section rather than a guess
    assert "## Resources" not in write_summary(_run(tmp_path, "old", 2)).read_text("utf-8")


def test_a_summary_over_attempts_under_two_policies_counts_each(tmp_path: Path) -> None:
    from pytest_agentbench.reporting.summary import summarize

    run = load_run(_run(tmp_path, "mixed", 6, scale=1.0, mem=4096))
    frame = run.attempts.copy()
    frame.loc[frame.index[:2], "limit_mem_limit_mb"] = 2048.0
    policy = summarize(type(run)(run.path, run.meta, frame, ())).data["resources"]
    mem = next(f for f in policy["fields"] if f["field"] == "limits.mem_limit_mb")
    assert mem["values"] == [{"value": 4096.0, "attempts": 4}, {"value": 2048.0, "attempts": 2}]
