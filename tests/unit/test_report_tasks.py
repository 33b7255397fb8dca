"""`agentbench report tasks` over oracle, nop and scripted runs flags the expected tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pytest_agentbench.reporting.cli as cli
from tests.support.synthetic import make_record, write_run

VALID = ["t0", "t1", "t2", "t3", "t4"]
INVALID = "t5"  # SETUP_FAILED in every run: a task problem, never scored


def _run(root: Path, name: str, variant: str, outcomes: dict[str, str | None]) -> Path:
    """outcomes: task -> None (passed) or its failure reason."""
    records = [make_record(f"run-{name}", task, "s", variant, 0, 1, reason is None, reason,
                           steps=2, duration=1.0)
               for task, reason in outcomes.items()]
    return write_run(root / name, records, variant=variant, run_id=f"run-{name}")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    out = tmp_path / "runs"
    fail = "TESTS_FAILED"
    _run(out, "oracle", "oracle", {t: None for t in VALID} | {INVALID: "SETUP_FAILED"})
    _run(out, "nop", "nop", {t: fail for t in VALID} | {INVALID: "SETUP_FAILED"})
    # the scripted variant, two runs pooled: t0 passed; t1 passed once, its other attempt an
    # infra error (not scored); t2 passed in one run of two (rate 0.5); t3, t4 failed
    _run(out, "scripted-1", "scripted",
         {"t0": None, "t1": None, "t2": None, "t3": fail, "t4": fail, INVALID: "SETUP_FAILED"})
    _run(out, "scripted-2", "scripted",
         {"t0": None, "t1": "LLM_ERROR", "t2": fail, "t3": fail, "t4": fail})
    return out


def _report(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> dict[str, Any]:
    code = cli.main(["report", "tasks", *args, "--out", str(root), "--format", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data: dict[str, Any] = json.loads(captured.out)
    return data


def _signals(data: dict[str, Any]) -> dict[str, str]:
    return {row["task_id"]: row["signal"] for row in data["tasks"]}


def test_every_run_of_the_root_pooled_by_variant(capsys: pytest.CaptureFixture[str],
                                                 root: Path) -> None:
    data = _report(capsys, root)
    assert data["variants"] == ["nop", "oracle", "scripted"]  # run directories by name
    assert len(data["runs"]) == 4
    # oracle passes every valid task and nop fails it: every valid task discriminates
    assert _signals(data) == {t: "discriminating" for t in VALID}
    assert data["never_passed"] == [] and data["always_passed"] == []
    assert data["unscored"] == [INVALID]
    t1 = next(r for r in data["tasks"] if r["task_id"] == "t1")["rates"]
    assert t1["scripted"] == {"passed": 1, "attempts": 1, "rate": 1.0}  # the infra error left out
    t2 = next(r for r in data["tasks"] if r["task_id"] == "t2")["rates"]
    assert t2["scripted"] == {"passed": 1, "attempts": 2, "rate": 0.5}


def test_nop_and_scripted(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    data = _report(capsys, root, "nop", "scripted-1", "scripted-2")
    assert _signals(data) == {"t0": "discriminating", "t1": "discriminating",
                              "t2": "discriminating", "t3": "never-passed",
                              "t4": "never-passed"}
    assert data["discriminating"] == ["t0", "t1", "t2"]  # by spread, then id
    assert data["never_passed"] == ["t3", "t4"]
    # a spread of 0.5 (t2: 1/2 against 0/1) is weak under a stricter threshold
    strict = _report(capsys, root, "nop", "scripted-1", "scripted-2", "--min-spread", "0.75")
    assert _signals(strict)["t2"] == "weak"
    # counted as a failure, the infra error halves t1's rate
    infra = _report(capsys, root, "nop", "scripted-1", "scripted-2", "--infra-as-failure")
    t1 = next(r for r in infra["tasks"] if r["task_id"] == "t1")["rates"]
    assert t1["scripted"] == {"passed": 1, "attempts": 2, "rate": 0.5}


def test_oracle_and_scripted(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    data = _report(capsys, root, "oracle", "scripted-1", "scripted-2")
    assert data["always_passed"] == ["t0", "t1"]
    assert data["discriminating"] == ["t3", "t4", "t2"]
    assert data["never_passed"] == []


def test_one_variant_alone_cannot_discriminate(capsys: pytest.CaptureFixture[str],
                                               root: Path) -> None:
    data = _report(capsys, root, "scripted-1", "scripted-2")
    assert _signals(data) == {"t0": "always-passed", "t1": "always-passed",
                              "t2": "one-variant", "t3": "never-passed", "t4": "never-passed"}


def test_a_task_some_variant_never_scored_is_partial(capsys: pytest.CaptureFixture[str],
                                                      root: Path) -> None:
    _run(root, "late", "late", {"t0": None, "t1": "SANDBOX_ERROR", "t2": "TESTS_FAILED"})
    data = _report(capsys, root, "oracle", "late")
    # t1: late has only an infra error; t3, t4: late never ran them. Oracle passing them alone
    # does not make them always passed.
    assert _signals(data) == {"t0": "always-passed", "t1": "partial", "t2": "discriminating",
                              "t3": "partial", "t4": "partial"}


def test_markdown(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    assert cli.main(["report", "tasks", "oracle", "nop", "--out", str(root)]) == 0
    text = capsys.readouterr().out
    assert "| task | oracle | nop | spread | signal |" in text
    assert "| t0 | 1/1 (100.0%) | 0/1 (0.0%) | 100.0% | discriminating |" in text
    assert "## Never passed\n\nnone" in text and "## No scored attempt\n\nt5" in text
    assert "No item-response model is fitted" in text


def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], root: Path,
                                      tmp_path: Path) -> None:
    assert cli.main(["report", "tasks", "nope", "--out", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err
    (tmp_path / "empty").mkdir()
    assert cli.main(["report", "tasks", "--out", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no run directory with attempts.jsonl" in err
    assert cli.main(["report", "tasks", "--out", str(root), "--min-spread", "0"]) == 2
    assert "--min-spread" in capsys.readouterr().err
    bad = root / "broken"
    bad.mkdir()
    (bad / "attempts.jsonl").write_text("{not json\n{}\n")
    assert cli.main(["report", "tasks", "--out", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "broken" in err
