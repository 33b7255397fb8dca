"""`report compare`: N runs side by side, paired tests against a baseline equal statsmodels'."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

import pytest_agentbench.cli.main as agentbench
import pytest_agentbench.reporting.cli as cli
from pytest_agentbench.reporting.compare import COMPARE_COLUMNS, compare_runs
from pytest_agentbench.reporting.compare_render import render_compare
from pytest_agentbench.reporting.load import ReportError, load_runs
from tests.support.synthetic import make_record, write_run

N = 40
LLM_FAILS = {3, 8, 11, 19, 27, 31, 36}  # 7 tasks the llm-like run fails


def _records(name: str, passed: Any, suite: Any = None, tasks: int = N,
             steps: int = 4) -> list[dict[str, Any]]:
    out = []
    for i in range(tasks):
        ok = bool(passed(i))
        s = suite(i) if suite else ("custom-dev", "custom-heldout")[i % 2]
        out.append(make_record(f"run-{name}", f"t{i:03d}", s, name, 0, 1, ok,
                               None if ok else "TESTS_FAILED", steps=steps + i % 3,
                               duration=10.0 + i))
    return out


@pytest.fixture
def three(tmp_path: Path) -> list[Path]:
    """oracle (all pass), nop (all fail), llm-like (passes all but 7; one infra error)."""
    llm = _records("llm_v0", lambda i: i not in LLM_FAILS)
    llm[5] = make_record("run-llm_v0", "t005", "custom-heldout", "llm_v0", 0, 1, False,
                         "LLM_ERROR", steps=2, duration=3.0)
    return [write_run(tmp_path / "oracle", _records("oracle", lambda i: True, steps=1),
                      variant="oracle", run_id="run-oracle"),
            write_run(tmp_path / "nop", _records("nop", lambda i: False, steps=0),
                      variant="nop", run_id="run-nop"),
            write_run(tmp_path / "llm", llm, variant="llm_v0", run_id="run-llm_v0")]


def _statsmodels_p(a: list[bool], b: list[bool]) -> float:
    """McNemar by statsmodels from raw outcomes (exact below 25 discordant pairs)."""
    a_only = sum(x and not y for x, y in zip(a, b, strict=True))
    b_only = sum(y and not x for x, y in zip(a, b, strict=True))
    both = sum(x and y for x, y in zip(a, b, strict=True))
    neither = len(a) - a_only - b_only - both
    res = mcnemar([[both, a_only], [b_only, neither]], exact=a_only + b_only < 25,
                  correction=True)
    return float(res.pvalue)


def test_three_runs_side_by_side_and_pvalues_equal_statsmodels(three: list[Path]) -> None:
    runs = load_runs(three, fields="all")
    report = compare_runs(runs, baseline=0)
    rows = {r["run"]: r for r in report.data["runs"]}
    assert list(rows) == ["oracle", "nop", "llm_v0"] and rows["oracle"]["baseline"]
    # pass rates and Wilson intervals as the summary computes them
    assert rows["oracle"]["pass_rate"] == 1.0 and rows["nop"]["pass_rate"] == 0.0
    assert rows["llm_v0"]["scored"] == N - 1  # the infra error is not scored
    assert rows["llm_v0"]["passed"] == N - 1 - len(LLM_FAILS)
    low, high = proportion_confint(N - 1 - len(LLM_FAILS), N - 1, method="wilson")
    assert rows["llm_v0"]["ci_low"] == pytest.approx(low, abs=1e-12)
    assert rows["llm_v0"]["ci_high"] == pytest.approx(high, abs=1e-12)
    # paired against the oracle: nop has 40 discordant pairs (chi-square), llm 7 (exact)
    oracle = [True] * N
    nop_p = _statsmodels_p(oracle, [False] * N)
    keep = [i for i in range(N) if i != 5]  # the infra pair is dropped
    llm_p = _statsmodels_p([True] * len(keep), [i not in LLM_FAILS for i in keep])
    assert rows["nop"]["paired"]["mcnemar"]["exact"] is False
    assert rows["llm_v0"]["paired"]["mcnemar"]["exact"] is True
    assert abs(rows["nop"]["paired"]["mcnemar"]["pvalue"] - nop_p) < 1e-12
    assert abs(rows["llm_v0"]["paired"]["mcnemar"]["pvalue"] - llm_p) < 1e-12
    assert rows["llm_v0"]["paired"]["pairs"] == N - 1
    # the table: every run x (overall, 2 suites, 40 tasks), the overall rows carry the p-values
    t = report.table
    assert list(t.columns) == COMPARE_COLUMNS and len(t) == 3 * (1 + 2 + N)
    over = t[t["scope_type"] == "overall"].set_index("run")
    assert abs(over.loc["llm_v0", "mcnemar_pvalue"] - llm_p) < 1e-12
    assert over.loc["nop", "diff_vs_baseline"] == -1.0
    task = t[(t["scope_type"] == "task") & (t["scope"] == "t003")].set_index("run")
    assert task.loc["llm_v0", "passed"] == 0 and task.loc["oracle", "passed"] == 1
    # cost, tokens, steps, wall time: means over scored attempts
    nop_over = over.loc["nop"]
    assert nop_over["steps_per_attempt"] == pytest.approx(sum(i % 3 for i in range(N)) / N)
    assert nop_over["wall_sec_per_attempt"] == pytest.approx(10.0 + (N - 1) / 2)
    assert nop_over["tokens_per_attempt"] == pytest.approx(1050 * nop_over["steps_per_attempt"])
    assert nop_over["cost_usd"] == pytest.approx(sum(r["usage"]["cost_usd"] for r in
                                                     _records("nop", lambda i: False, steps=0)))


def test_unknown_cost_is_empty_not_zero(tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        records = _records(name, lambda i: True, tasks=3)
        for r in records:
            r["usage"]["cost_usd"] = None
        runs.append(write_run(tmp_path / name, records, variant=name, run_id=f"run-{name}"))
    report = compare_runs(load_runs(runs, fields="all"))
    assert report.data["runs"][0]["cost_usd"] is None
    assert report.table["cost_usd"].isna().all()


def test_a_refused_pairing_is_one_line_in_the_table(three: list[Path], tmp_path: Path) -> None:
    other = write_run(tmp_path / "other", _records("other", lambda i: True, tasks=N + 3),
                      variant="other", run_id="run-other")
    older = _records("older", lambda i: True)
    for r in older:
        r["harness_version"] = "0.0.1"
    old = write_run(tmp_path / "old", older, variant="older", run_id="run-older",
                    harness_version="0.0.1")
    report = compare_runs(load_runs([*three, other, old], fields="all"))
    rows = {r["run"]: r for r in report.data["runs"]}
    note = rows["other"]["paired"]["note"]
    assert note.startswith("not paired: tasks: 3 task(s) only in B") and "\n" not in note
    assert rows["older"]["paired"]["note"].startswith("not paired: harness_version")
    assert rows["other"]["pass_rate"] == 1.0  # its own figures are still there
    md = render_compare(report, "md")
    assert "not paired: tasks: 3 task(s) only in B" in md
    # with --missing skip the extra tasks are dropped and the pairing holds
    skip = compare_runs(load_runs([three[0], other], fields="all"), missing="skip")
    assert skip.data["runs"][1]["paired"]["pairs"] == N


def test_baseline_choice_and_renderings(three: list[Path]) -> None:
    report = compare_runs(load_runs(three, fields="all"), baseline=2)
    rows = {r["run"]: r for r in report.data["runs"]}
    assert rows["llm_v0"]["baseline"] and rows["llm_v0"]["paired"] is None
    assert rows["oracle"]["paired"]["difference"] > 0  # oracle - llm
    md = render_compare(report, "md")
    assert "baseline: llm_v0" in md and "(baseline)" in md and "## By task" in md
    two = render_compare(compare_runs(load_runs([three[0], three[2]], fields="all")), "md")
    assert two.index("| t003 |") < two.index("| t000 |")  # the tasks that differ most first
    data = json.loads(render_compare(report, "json"))
    assert data["schema"] == "agentbench.compare" and len(data["runs"]) == 3
    rows_csv = list(csv.DictReader(io.StringIO(render_compare(report, "csv"))))
    assert len(rows_csv) == 3 * (1 + 2 + N) and set(rows_csv[0]) == set(COMPARE_COLUMNS)
    with pytest.raises(ReportError, match="at least two"):
        compare_runs(load_runs(three[:1], fields="all"))


def test_same_variant_twice_gets_distinct_names(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", _records("v", lambda i: i % 2 == 0), variant="v",
                  run_id="run-a")
    b = write_run(tmp_path / "b", _records("v", lambda i: i % 3 == 0), variant="v",
                  run_id="run-b")
    report = compare_runs(load_runs([a, b], fields="all"))
    assert [r["run"] for r in report.data["runs"]] == ["v (run-a)", "v (run-b)"]


def test_cli_prints_the_table_and_writes_csv(three: list[Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out_csv = tmp_path / "cmp.csv"
    code = agentbench.main(["report", "compare", *map(str, three), "--baseline", str(three[1]),
                            "--csv", str(out_csv), "--resamples", "500"])
    assert code == 0
    printed = capsys.readouterr()
    assert "# Comparison of 3 runs (baseline: nop)" in printed.out
    assert "| oracle |" in printed.out and f"wrote {out_csv}" in printed.err
    rows = list(csv.DictReader(out_csv.open()))
    base = [r for r in rows if r["scope_type"] == "overall" and r["baseline"] == "True"]
    assert [r["run"] for r in base] == ["nop"]
    # a baseline that is not among the runs is put in front
    assert cli.main(["report", "compare", str(three[0]), "--baseline", str(three[2]),
                     "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in doc["runs"]] == ["llm_v0", "oracle"] and doc["baseline"] == "llm_v0"
    # bad input: one line, exit 2
    assert cli.main(["report", "compare", str(three[0]), str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err
    assert cli.main(["report", "compare", str(three[0])]) == 2
    assert "at least two runs" in capsys.readouterr().err


def test_csv_equals_pandas_to_csv(three: list[Path], tmp_path: Path) -> None:
    from pytest_agentbench.reporting.compare_render import frame_csv

    odd = _records("odd", lambda i: i % 2 == 0, suite=lambda i: 'a,"b"\nc' if i < 3 else "s")
    run = write_run(tmp_path / "odd", odd, variant='odd, "quoted"', run_id="run-odd")
    report = compare_runs(load_runs([*three, run], fields="all"), allow_mismatch=["image"])
    expected = report.table.to_csv(index=False, lineterminator="\n", float_format="%.10g")
    assert render_compare(report, "csv") == expected == frame_csv(report.table)


def test_cli_names_runs_in_the_output_root(three: list[Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = three[0].parent  # oracle, nop, llm under one output root
    assert agentbench.main(["report", "compare", "--out", str(root), "nop", "llm",
                            "--baseline", "oracle", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    over = [(r["run"], r["baseline"]) for r in rows if r["scope_type"] == "overall"]
    assert over == [("oracle", "True"), ("nop", "False"), ("llm_v0", "False")]


def test_pairs_join_on_task_ids_not_on_file_order(tmp_path: Path) -> None:
    """Cold review: against an all-pass or all-fail baseline McNemar's counts do not depend on
    which tasks are paired. Here both runs have mixed outcomes and B's records are written in
    another order, so pairing by position gives other counts than pairing by task id."""
    import random

    a_pass = {i for i in range(N) if i % 3 != 0}
    b_pass = {i for i in range(N) if i % 2 == 0}
    a = _records("a", lambda i: i in a_pass)
    b = _records("b", lambda i: i in b_pass)
    random.Random(7).shuffle(b)
    runs = [write_run(tmp_path / "a", a, variant="a", run_id="run-a"),
            write_run(tmp_path / "b", b, variant="b", run_id="run-b")]
    report = compare_runs(load_runs(runs, fields="all"), baseline=0)
    by_task = _statsmodels_p([i in a_pass for i in range(N)], [i in b_pass for i in range(N)])
    by_position = _statsmodels_p([i in a_pass for i in range(N)],
                                 [int(r["task_id"][1:]) in b_pass for r in b])
    assert abs(by_task - by_position) > 1e-6  # the test can tell the two apart
    paired = report.data["runs"][1]["paired"]
    assert abs(paired["mcnemar"]["pvalue"] - by_task) < 1e-12
