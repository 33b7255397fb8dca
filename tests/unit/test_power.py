"""power.py (Connor's sample size, the MDE, the design effect) and the gate's three verdicts."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import norm
from statsmodels.stats.contingency_tables import mcnemar

import pytest_agentbench.reporting.cli as cli
import pytest_agentbench.reporting.power as power
from tests.support.synthetic import make_record, write_run


def connor(delta: float, psi: float, alpha: float, pw: float) -> float:
    """Connor (1987), computed here independently of power.py."""
    za, zb = norm.ppf(1 - alpha / 2), norm.ppf(pw)
    return float((za * np.sqrt(psi) + zb * np.sqrt(psi - delta**2)) ** 2 / delta**2)


@pytest.mark.parametrize(("delta", "psi", "alpha", "pw"), [
    (0.1, 0.2, 0.05, 0.8), (0.05, 0.3, 0.05, 0.9), (0.2, 0.2, 0.01, 0.8), (-0.1, 0.25, 0.1, 0.7),
])
def test_pairs_needed_is_connors_formula(delta: float, psi: float, alpha: float,
                                         pw: float) -> None:
    exact = connor(delta, psi, alpha, pw)
    assert power.pairs_needed_exact(delta, psi, alpha, pw) == pytest.approx(exact, rel=1e-12)
    assert power.pairs_needed(delta, psi, alpha, pw) == math.ceil(exact)


def test_connor_example_by_hand() -> None:
    # z(0.975) = 1.959964, z(0.8) = 0.841621: (1.959964 * sqrt(.2) + 0.841621 * sqrt(.19))^2 / .01
    assert power.pairs_needed(0.1, 0.2) == 155


def simulated_power(n: int, p10: float, p01: float, alpha: float, reps: int, seed: int) -> float:
    """Share of `reps` samples of n independent pairs in which statsmodels' McNemar rejects."""
    rng = np.random.default_rng(seed)
    cells = rng.multinomial(n, [p10, p01, 1 - p10 - p01], size=reps)
    rejected = 0
    for b, c, _ in cells:
        if b + c == 0:
            continue
        res = mcnemar([[0, b], [c, 0]], exact=False, correction=False)
        rejected += res.pvalue < alpha
    return rejected / reps


@pytest.mark.parametrize(("p10", "p01", "alpha", "pw"), [
    (0.05, 0.15, 0.05, 0.8), (0.10, 0.18, 0.05, 0.9), (0.05, 0.10, 0.05, 0.8),
])
def test_simulated_mcnemar_reaches_the_requested_power(p10: float, p01: float, alpha: float,
                                                       pw: float) -> None:
    n = power.pairs_needed(p01 - p10, p10 + p01, alpha, pw)
    achieved = simulated_power(n, p10, p01, alpha, reps=2000, seed=14)
    assert abs(achieved - pw) < 0.04, (n, achieved)
    # half the pairs fall clearly short: the check can fail
    assert simulated_power(n // 2, p10, p01, alpha, reps=2000, seed=15) < pw - 0.1


def test_mde_inverts_the_sample_size() -> None:
    for n, psi in ((155, 0.2), (1000, 0.1), (50, 0.4)):
        mde = power.minimum_detectable_effect(n, psi, 0.05, 0.8)
        assert mde is not None and 0 < mde <= 1
        assert power.pairs_needed_exact(mde, max(psi, mde), 0.05, 0.8) == pytest.approx(n, rel=1e-9)
    assert power.minimum_detectable_effect(155, 0.2) == pytest.approx(0.1, abs=2e-3)


def test_mde_with_no_discordance_and_too_few_pairs() -> None:
    # psi = 0: the effect itself must make the pairs discordant, all one way:
    # n = (z_a + z_b sqrt(1 - d))^2 / d  -> about 53 points for 12 pairs
    mde = power.minimum_detectable_effect(12, 0.0)
    assert mde is not None and 0.5 < mde < 0.56
    za, zb = norm.ppf(0.975), norm.ppf(0.8)
    assert (za + zb * math.sqrt(1 - mde)) ** 2 / mde == pytest.approx(12, rel=1e-9)
    assert power.minimum_detectable_effect(3, 0.0) is None  # below z_a^2 = 3.84 pairs
    assert power.minimum_detectable_effect(0, 0.1) is None


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="discordant proportion"):
        power.pairs_needed(0.2, 0.1)
    with pytest.raises(ValueError, match="effect"):
        power.pairs_needed(0.0, 0.1)
    with pytest.raises(ValueError, match="power"):
        power.pairs_needed(0.1, 0.2, power=1.0)


def test_anova_icc_by_hand() -> None:
    # clusters {1,0}, {1,1}, {0,0}: means .5, 1, 0; grand .5; MSB = 2(0 + .25 + .25)/2 = .5;
    # MSW = (.25 + .25)/(6 - 3) = 1/6; m0 = 2; ICC = (.5 - 1/6)/(.5 + 1/6) = .5
    icc = power.anova_icc([1, 0, 1, 1, 0, 0], [0, 0, 1, 1, 2, 2])
    assert icc == pytest.approx(0.5, abs=1e-12)
    assert power.anova_icc([1, 1, 0, 0], ["a", "a", "b", "b"]) == 1.0
    assert power.anova_icc([1, 0, 1, 0], [0, 1, 2, 3]) is None  # one value per cluster
    # nothing varies: 0/0, undefined (issue 26: it read 0.0 and shrank the plan threefold)
    assert power.anova_icc([1, 1, 1, 1], [0, 0, 1, 1]) is None
    assert power.anova_icc([0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1]) is None


def test_design_effect_spreads_pairs_over_tasks() -> None:
    size = power.tasks_needed(0.1, 0.2, attempts=3, icc=0.5)
    assert size.independent_pairs == 155 and size.design_effect == 2.0
    assert size.tasks == math.ceil(connor(0.1, 0.2, 0.05, 0.8) * 2 / 3) == 104
    assert size.pairs == 312
    unknown = power.tasks_needed(0.1, 0.2, attempts=3, icc=None)  # ICC 1: attempts worth nothing
    assert unknown.tasks == 155


# --- the gate's three verdicts through the CLI ----------------------------------------------

def _run(root: Path, name: str, outcomes: list[bool]) -> Path:
    records = [make_record(f"run-{name}", f"t{i:04d}", "custom-dev", name, 0, 1, ok,
                           None if ok else "TESTS_FAILED", 3, 10.0)
               for i, ok in enumerate(outcomes)]
    return write_run(root / name, records, variant=name, run_id=f"run-{name}")


def test_gate_regression_ok_and_inconclusive_exit_codes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    many = [i % 3 != 0 for i in range(400)]
    base, same = _run(tmp_path, "base", many), _run(tmp_path, "same", many)
    worse = _run(tmp_path, "worse", [ok and i % 10 != 1 for i, ok in enumerate(many)])
    few_a, few_b = _run(tmp_path, "fewa", many[:12]), _run(tmp_path, "fewb", many[:12])

    def gate(a: Path, b: Path, *extra: str) -> tuple[int, dict[str, Any]]:
        code = cli.main(["gate", "--baseline", str(a), "--candidate", str(b), "--format", "json",
                         "--resamples", "500", *extra])
        return code, json.loads(capsys.readouterr().out)

    code, doc = gate(base, worse)
    assert code == 1 and doc["outcome"] == "regression"
    code, doc = gate(base, same)  # 400 identical pairs: MDE about 2 points < 5
    assert code == 0 and doc["outcome"] == "ok" and doc["mde"] < 0.05
    assert "The smallest drop these 400 pairs detect" in str(doc["verdict"])
    code, doc = gate(few_a, few_b)  # 12 pairs: a 5-point drop would go unnoticed
    assert code == 3 and doc["outcome"] == "inconclusive" and doc["mde"] > 0.05
    assert str(doc["verdict"]).startswith("INCONCLUSIVE")
    assert "agentbench plan" in str(doc["verdict"])
    code, doc = gate(few_a, few_b, "--inconclusive-ok")
    assert code == 0 and doc["outcome"] == "inconclusive" and doc["exit_code"] == 0
    code, doc = gate(few_a, few_b, "--max-drop", "0.6")  # 60 points is detectable with 12 pairs
    assert code == 0 and doc["outcome"] == "ok"
    code, doc = gate(few_a, few_b, "--margin", "0.05")  # non-inferiority: the same rule
    assert code == 3 and doc["outcome"] == "inconclusive"
