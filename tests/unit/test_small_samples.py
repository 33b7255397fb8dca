"""Issue 26, item 0: small samples through the CLI (`agentbench gate`, `report paired`, `plan`).

A false green (the bootstrap's bound degenerates when no pair favours the baseline), two answers
for one question (gate and report paired on different primary methods), large-sample p-values on
one discordant pair, and an ICC of 0/0 read as 0. Runs are real run directories on disk.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

import pytest_agentbench.reporting.cli as cli
import pytest_agentbench.reporting.stats as stats
from tests.support.synthetic import make_record, write_run


def _run(root: Path, name: str, tasks: dict[str, list[bool]]) -> str:
    records = [make_record(f"run-{name}", task, "custom-dev", name, i, len(outcomes), ok,
                           None if ok else "TESTS_FAILED", 3, 10.0)
               for task, outcomes in tasks.items() for i, ok in enumerate(outcomes)]
    return str(write_run(root / name, records, variant=name, run_id=f"run-{name}"))


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any]]:
    code = cli.main([*argv, "--format", "json", "--resamples", "2000"])
    return code, json.loads(capsys.readouterr().out)


def _gate(capsys: pytest.CaptureFixture[str], a: str, b: str,
          *extra: str) -> tuple[int, dict[str, Any]]:
    return _json(capsys, ["gate", "--baseline", a, "--candidate", b, *extra])


# the cases of the issue: the candidate wins the only discordant task, once and twice per task
LUCKY = ({"t1": [True], "t2": [True], "t3": [False]},
         {"t1": [True], "t2": [True], "t3": [True]})
LUCKY_X2 = ({"t1": [True, True], "t2": [True, True], "t3": [False, False]},
            {"t1": [True, True], "t2": [True, True], "t3": [True, True]})


@pytest.mark.parametrize("case", [LUCKY, LUCKY_X2], ids=["3x1", "3x2"])
def test_one_lucky_task_is_not_a_green_gate(tmp_path: Path, case: Any,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run(tmp_path, "a", case[0]), _run(tmp_path, "b", case[1])
    same_code, same = _gate(capsys, a, a)
    assert same["outcome"] == "inconclusive" and same_code == 3
    code, doc = _gate(capsys, a, b)
    assert doc["outcome"] == "inconclusive" and code == 3, doc["verdict"]
    # the bound is the exact one over 3 tasks (the pairs scaled to tasks), never the
    # bootstrap's 0: Clopper-Pearson at alpha / 2 of 0 of 3 minus that of 1 of 3
    exact = (1 - 0.025 ** (1 / 3)) - proportion_confint(1, 3, alpha=0.05, method="beta")[0]
    assert doc["drop_upper_bound"] == pytest.approx(exact, abs=1e-9)
    assert doc["drop_upper_bound"] > 0.6 and doc["bound_method"].startswith("exact")
    assert "0.0 points" not in doc["verdict"] and "too few for the bootstrap" in doc["verdict"]
    # a candidate as good on 3 tasks cannot rule out even a 50-point drop
    assert _gate(capsys, a, b, "--max-drop", "0.5")[1]["outcome"] == "inconclusive"


def test_the_bound_is_never_tighter_than_the_exact_one(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Over runs where the bootstrap degenerates (every discordant pair one way), the gate's
    upper and lower bounds hold the exact ones; with many tasks each way the bootstrap stands."""
    for i, (n, wins_b, wins_a) in enumerate([(5, 2, 0), (12, 0, 12), (30, 30, 0), (20, 1, 3),
                                             (60, 12, 11)]):
        # B alone passes the first wins_b tasks, A alone the last wins_a, both the rest
        a = {f"t{k:02d}": [k >= wins_b] for k in range(n)}
        b = {f"t{k:02d}": [k < n - wins_a] for k in range(n)}
        code, doc = _gate(capsys, _run(tmp_path, f"a{i}", a), _run(tmp_path, f"b{i}", b))
        table = doc["paired"]["table"]
        assert (table["b_only"], table["a_only"]) == (wins_b, wins_a)
        low, high = stats.exact_difference_bounds(wins_a, wins_b, n, 0.05)
        alone = doc["paired"]["exact"]["bootstrap_alone"]
        assert alone == (min(wins_a, wins_b) >= stats.BOOTSTRAP_MIN_PER_SIDE)
        if not alone:
            assert doc["drop_upper_bound"] >= high - 1e-12 and doc["drop_lower_bound"] <= low
        if wins_b == n:  # 30 of 30 better: the candidate is shown not worse, whatever the rule
            assert doc["outcome"] == "ok" and code == 0


@pytest.mark.parametrize("seed", range(3))
def test_report_paired_and_gate_give_one_answer(tmp_path: Path, seed: int,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 26: `report paired` said McNemar not significant (p = 0.5), the paired section of
    `gate` bootstrap significant (CI [+100, +100] from 2 tasks). Same method, same verdict."""
    rng = np.random.default_rng(seed)
    cases = [({"t1": [False], "t2": [False]}, {"t1": [True], "t2": [True]})]
    for n, k, pa, pb in ((6, 1, 0.5, 0.9), (15, 2, 0.7, 0.3), (40, 1, 0.5, 0.6),
                         (80, 3, 0.4, 0.7)):
        cases.append(tuple({f"t{t:02d}": [bool(x) for x in rng.random(k) < p] for t in range(n)}
                           for p in (pa, pb)))
    for i, (ta, tb) in enumerate(cases):
        a, b = _run(tmp_path, f"a{i}", ta), _run(tmp_path, f"b{i}", tb)
        _, paired = _json(capsys, ["report", "paired", "--run-a", a, "--run-b", b])
        _, gated = _gate(capsys, a, b)
        inner = gated["paired"]
        assert inner["method"] == paired["method"] == gated["primary_method"] == "mcnemar"
        assert inner["significant"] == paired["significant"] == gated["significant"], i
        assert inner["mcnemar"] == paired["mcnemar"] and inner["bootstrap"] == paired["bootstrap"]
        word = "not significant" if paired["significant"] is False else "significant"
        assert "as in report paired, is McNemar" in gated["verdict"] and word in gated["verdict"]
    # the pair: exact McNemar p = 0.5, and the bootstrap, asked for, agrees
    _, boot = _json(capsys, ["report", "paired", "--run-a", _run(tmp_path, "x", cases[0][0]),
                             "--run-b", _run(tmp_path, "y", cases[0][1]), "--method",
                             "bootstrap"])
    assert boot["mcnemar"]["pvalue"] == 0.5 and boot["significant"] is False
    assert boot["bootstrap"]["ci_low"] < 0 and "widened to the exact" in boot["bootstrap"][
        "interval"]


def test_paired_page_hides_asymptotic_p_values_on_one_pair(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run(tmp_path, "a", LUCKY[0]), _run(tmp_path, "b", LUCKY[1])
    assert cli.main(["report", "paired", "--run-a", a, "--run-b", b]) == 0
    text = capsys.readouterr().out
    assert "p = 1**" in text  # the exact McNemar stands
    assert "0.3173" not in text and "0.4226" not in text
    assert "not shown: large-sample test, needs at least 25 tasks" in text


def test_plan_on_a_pilot_with_no_variance_takes_the_icc_as_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pilot = _run(tmp_path, "p", {f"t{i}": [True] * 3 for i in range(10)})
    assert cli.main(["plan", pilot, "--attempts", "3", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"]["icc"] is None and "undefined" in doc["inputs"]["icc_source"]
    assert doc["design_effect"] == 3.0  # ICC 1: three attempts count as one
    assert doc["tasks"] == doc["independent_pairs"]  # not a third of it
    assert cli.main(["plan", pilot, "--attempts", "3"]) == 0
    assert "taken as 1" in capsys.readouterr().out
    # two identical pilots: no pair difference varies
    assert cli.main(["plan", pilot, pilot, "--attempts", "3", "--format", "json"]) == 0
    two = json.loads(capsys.readouterr().out)
    assert two["inputs"]["icc"] is None and two["design_effect"] == 3.0


def test_clopper_pearson_matches_statsmodels() -> None:
    for x, n in ((0, 3), (1, 3), (3, 3), (7, 40), (40, 40)):
        ref = proportion_confint(x, n, alpha=0.1, method="beta")
        got = stats.clopper_pearson(x, n, 0.05)
        assert got == pytest.approx((ref[0] if x else 0.0, ref[1] if x < n else 1.0), abs=1e-12)


def test_exact_difference_bounds_cover_in_simulation() -> None:
    """Each one-sided 95% bound covers p10 - p01 at least 95% of the time, at small n."""
    rng = np.random.default_rng(7)
    for n, p10, p01 in ((3, 0.0, 0.3), (5, 0.2, 0.2), (8, 0.05, 0.4), (12, 0.3, 0.0),
                        (20, 0.1, 0.15)):
        cells = rng.multinomial(n, [p10, p01, 1 - p10 - p01], size=2000)
        bounds = {(int(x), int(y)): stats.exact_difference_bounds(x, y, n, 0.05)
                  for x, y in {(int(c[0]), int(c[1])) for c in cells}}
        low = np.array([bounds[int(c[0]), int(c[1])][0] for c in cells])
        high = np.array([bounds[int(c[0]), int(c[1])][1] for c in cells])
        d = p10 - p01
        assert (high >= d - 1e-12).mean() >= 0.95 and (low <= d + 1e-12).mean() >= 0.95
    assert stats.exact_difference_bounds(0, 0, 80, 0.05)[1] == pytest.approx(
        1 - 0.025 ** (1 / 80), abs=1e-12)
    assert math.isclose(stats.exact_difference_bounds(0, 0, 0, 0.05)[1], 1.0)


def test_gate_markdown_has_no_escaped_backticks_and_no_empty_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 22 polish: the inconclusive verdict's "`agentbench plan`" came out as a literal
    backslash-backtick once escaped for markdown; every table of the gate has rows."""
    a = _run(tmp_path, "a", LUCKY[0])
    assert cli.main(["gate", "--baseline", a, "--candidate", a]) == 3
    text = capsys.readouterr().out
    assert "agentbench plan says how many" in text and "\\`" not in text
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|---"):
            assert i + 1 < len(lines) and lines[i + 1].startswith("| "), text
