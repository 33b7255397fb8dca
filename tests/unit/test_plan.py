"""`agentbench plan`: tasks x attempts from one or two pilot runs, checked against Connor's formula
computed here and against a simulation of McNemar's test at the planned size."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm
from statsmodels.stats.contingency_tables import mcnemar

import pytest_agentbench.cli.main as top
import pytest_agentbench.reporting.cli as cli
from pytest_agentbench.reporting.load import ReportError, load_run, load_runs
from pytest_agentbench.reporting.plan import plan
from tests.support.synthetic import make_record, write_run


def connor(delta: float, psi: float, alpha: float = 0.05, pw: float = 0.8) -> float:
    za, zb = norm.ppf(1 - alpha / 2), norm.ppf(pw)
    return float((za * math.sqrt(psi) + zb * math.sqrt(psi - delta**2)) ** 2 / delta**2)


def _run(root: Path, name: str, tasks: dict[str, list[bool]]) -> Path:
    records = [make_record(f"run-{name}", task, "custom-dev", name, i, len(outcomes), ok,
                           None if ok else "TESTS_FAILED", 3, 10.0)
               for task, outcomes in tasks.items() for i, ok in enumerate(outcomes)]
    return write_run(root / name, records, variant=name, run_id=f"run-{name}")


def two_pilots(root: Path) -> tuple[Path, Path]:
    """100 tasks: A passes 0-59; B fails 0-4 (p10 = .05) and also passes 60-74 (p01 = .15)."""
    a = {f"t{i:03d}": [i < 60] for i in range(100)}
    b = {f"t{i:03d}": [5 <= i < 75] for i in range(100)}
    return _run(root, "a", a), _run(root, "b", b)


def test_two_pilots_use_the_observed_discordance(tmp_path: Path) -> None:
    ra, rb = load_runs(two_pilots(tmp_path))
    d = plan(ra, rb, effect=0.1)
    inp = d["inputs"]
    assert (inp["p10"], inp["p01"]) == (pytest.approx(0.05), pytest.approx(0.15))
    assert inp["psi"] == pytest.approx(0.2) and inp["observed_difference"] == pytest.approx(0.1)
    assert d["independent_pairs"] == math.ceil(connor(0.1, 0.2)) == 155
    assert d["tasks"] == 155 and d["attempts_per_task"] == 1
    assert "155 task(s) x 1 attempt in each variant" in d["sentence"]
    assert "you need more tasks" in d["sentence"]  # the pilot had 100
    smaller = plan(ra, rb, effect=0.05)
    assert smaller["tasks"] == math.ceil(connor(0.05, 0.2))
    # an effect above the observed discordance raises psi to the effect
    big = plan(ra, rb, effect=0.3)
    assert big["inputs"]["psi"] == 0.3 and big["tasks"] == math.ceil(connor(0.3, 0.3))


def test_planned_size_reaches_the_power_in_simulation(tmp_path: Path) -> None:
    ra, rb = load_runs(two_pilots(tmp_path))
    d = plan(ra, rb, effect=0.1, power_=0.8)
    n, p10, p01 = d["independent_pairs"], d["inputs"]["p10"], d["inputs"]["p01"]
    rng = np.random.default_rng(2024)
    cells = rng.multinomial(n, [p10, p01, 1 - p10 - p01], size=2000)
    hits = sum(mcnemar([[0, b], [c, 0]], exact=False, correction=False).pvalue < 0.05
               for b, c, _ in cells if b + c)
    assert abs(hits / 2000 - 0.8) < 0.04, hits / 2000


def test_one_pilot_assumes_a_shift(tmp_path: Path) -> None:
    run = load_run(_run(tmp_path, "p", {"t1": [True, True, False], "t2": [False, False],
                                        "t3": [True, False], "t4": [True]}))
    d = plan(run, effect=0.1)
    inp = d["inputs"]
    # c(n-c)/(n(n-1)) over tasks with >= 2 attempts: 2/6, 0, 1/2 -> mean 5/18
    assert inp["within_task_variance"] == pytest.approx(5 / 18, abs=1e-12)
    assert inp["psi"] == pytest.approx(2 * 5 / 18 + 0.1, abs=1e-12)
    assert d["tasks"] == math.ceil(connor(0.1, 2 * 5 / 18 + 0.1))
    assert "shifted by the effect" in inp["assumption"]
    # ICC of the outcome by hand: MSB = (3/36 + 1/2 + 1/4)/3 = .2778 < MSW = (2/3 + 1/2)/4 = .2917
    assert inp["icc"] == 0.0
    three = plan(run, effect=0.1, attempts=3)
    assert three["design_effect"] == 1.0
    assert three["tasks"] == math.ceil(connor(0.1, inp["psi"]) / 3)


def test_one_pilot_with_single_attempts_bounds_the_variance(tmp_path: Path) -> None:
    run = load_run(_run(tmp_path, "p", {f"t{i}": [i < 4] for i in range(10)}))
    d = plan(run, effect=0.05, attempts=2)
    assert d["inputs"]["within_task_variance"] == pytest.approx(0.4 * 0.6)
    assert d["inputs"]["psi"] == pytest.approx(0.48 + 0.05)
    # no ICC estimate: taken as 1, so the second attempt adds nothing
    assert d["design_effect"] == 2.0 and "taken as 1" in d["inputs"]["icc_source"]
    assert d["tasks"] == math.ceil(connor(0.05, 0.53))
    given = plan(run, effect=0.05, attempts=2, icc=0.25)
    assert given["design_effect"] == 1.25
    assert given["tasks"] == math.ceil(connor(0.05, 0.53) * 1.25 / 2)


def test_bad_input_is_refused(tmp_path: Path) -> None:
    run = load_run(_run(tmp_path, "p", {"t1": [True]}))
    for kw in ({"effect": 0.0}, {"effect": 1.5}, {"alpha": 1.0}, {"power_": 0.0},
               {"attempts": 0}, {"icc": 2.0}):
        with pytest.raises(ReportError):
            plan(run, **kw)


def test_cli_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = two_pilots(tmp_path)
    assert top.main(["plan", str(a), str(b), "--effect", "0.1"]) == 0  # the console script
    out = capsys.readouterr().out
    assert out.startswith("# Plan: 155 tasks x 1 attempt(s)")
    assert "Connor 1987" in out and "p10 = 0.0500, p01 = 0.1500" in out
    assert cli.main(["plan", str(a), "--effect", "0.05", "--attempts", "3", "--format",
                     "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "agentbench.plan" and doc["inputs"]["mode"] == "one pilot"
    assert doc["attempts_per_task"] == 3 and doc["attempts_per_run"] == 3 * doc["tasks"]
    for argv in (["plan", str(a), "--effect", "0"], ["plan", str(a), str(b), str(a)],
                 ["plan", str(tmp_path / "nothing")], ["plan", str(a), "--power", "1"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("agentbench: ") and err.count("\n") == 1, err
