"""Issue 20 item 9: smaller bad input to the newer commands and options.

An engine URL's password was printed in the unreachable-engine line (and in a bad spec's line);
`--agentbench-regrade` took any number (a 400-digit value never ends); `agentbench plan --effect
1e-300` and `agentbench report compare` with a run that has no attempts ended in tracebacks.
Each is now one line, no traceback, and no password.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pytest_agentbench.cli.main as agentbench
from pytest_agentbench.run.settings import build_settings
from pytest_agentbench.sandbox.docker.engines import EngineUnreachable, connect, parse_engine
from tests.support.synthetic import synthetic_records, write_run

PASSWORD = "s3cr3t-Pw-9q"


@pytest.mark.parametrize("url", [f"tcp://builder:{PASSWORD}@127.0.0.1:9,tls=off",
                                 f"ssh://builder:{PASSWORD}@127.0.0.1:9"])
def test_the_unreachable_engine_line_has_no_password(url: str) -> None:
    """issue 20 item 9: the URL was printed as given, password and all."""
    spec = parse_engine(url)
    with pytest.raises(EngineUnreachable) as info:
        connect(spec, timeout=10)
    line = str(info.value)
    assert PASSWORD not in line and "\n" not in line
    assert "builder" in line and "127.0.0.1" in line


def test_a_bad_engine_spec_line_has_no_password() -> None:
    """issue 20 item 9: the spec's own error line quoted the text as written."""
    with pytest.raises(ValueError) as info:
        parse_engine(f"tcp://builder:{PASSWORD}@127.0.0.1:2376,bogus=1")
    assert PASSWORD not in str(info.value) and "bogus" in str(info.value)


@pytest.mark.parametrize("value", ["1" + "0" * 400, "101", "1000000", "-1", "many"])
def test_regrade_is_a_small_bounded_count(tmp_path: Path, value: str) -> None:
    """issue 20 item 9: a 400-digit --agentbench-regrade was accepted and never ended."""
    lookup: dict[str, Any] = {"out": str(tmp_path / "runs"), "regrade": value}
    with pytest.raises(ValueError, match="^--agentbench-regrade: ") as info:
        build_settings(lookup.get, {}.get, suites=["s"], rootpath=tmp_path)
    assert "\n" not in str(info.value) and "100" in str(info.value)
    ini = {"regrade": value}
    with pytest.raises(ValueError, match=r"^agentbench_regrade \(ini\): "):
        build_settings({"out": str(tmp_path / "runs")}.get, ini.get, suites=["s"],
                       rootpath=tmp_path)


def test_regrade_within_bounds_is_accepted(tmp_path: Path) -> None:
    for value, expected in (("0", 0), ("3", 3), ("100", 100)):
        lookup = {"out": str(tmp_path / "runs"), "regrade": value}
        assert build_settings(lookup.get, {}.get, suites=["s"],
                              rootpath=tmp_path).regrade == expected


@pytest.fixture
def pilot(tmp_path: Path) -> Path:
    return write_run(tmp_path / "pilot", synthetic_records(40, attempts=2))


@pytest.mark.parametrize("effect", ["1e-300", "1e-9", "0", "-0.1", "1.5", "nan", "inf", "-inf"])
def test_plan_with_an_absurd_effect_is_one_line(
    pilot: Path, effect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 20 item 9: 1e-300 passed the (0, 1] check and divided by zero."""
    assert agentbench.main(["plan", str(pilot), f"--effect={effect}"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and "--effect" in err


def test_compare_with_a_run_without_attempts_is_one_line(
    tmp_path: Path, pilot: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 20 item 9: a KeyError out of pandas, with its traceback."""
    empty = write_run(tmp_path / "empty", [], variant="empty")
    other = write_run(tmp_path / "other", synthetic_records(40, attempts=2, seed=2),
                      variant="other")
    for runs in ([pilot, empty], [empty, pilot], [pilot, other, empty]):
        assert agentbench.main(["report", "compare", *map(str, runs)]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and err.count("\n") == 1, err
        assert "no attempts" in err and str(empty) in err
