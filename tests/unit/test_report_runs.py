"""Report commands name runs by path, by name in the output root, or `latest`, from any subdir."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import pytest_agentbench.reporting.cli as cli
from pytest_agentbench.reporting.load import ReportError
from pytest_agentbench.reporting.runs import newest_run, resolve_run
from tests.support.synthetic import make_record, write_run


def _run(root: Path, name: str, started: str, passed: bool = True) -> Path:
    records = [make_record(f"run-{name}", f"t{i}", "s", name, 0, 1, passed,
                           None if passed else "TESTS_FAILED", steps=2, duration=1.0)
               for i in range(4)]
    path = write_run(root / name, records, variant=name, run_id=f"run-{name}")
    meta = json.loads((path / "run.json").read_text())
    meta["started_at"] = started
    (path / "run.json").write_text(json.dumps(meta))
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with an ini output root, two runs in it, the cwd in a subdirectory."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nagentbench_out = out\n")
    _run(tmp_path / "out", "older", "2026-01-01T10:00:00+00:00", passed=False)
    _run(tmp_path / "out", "newer", "2026-01-02T10:00:00+00:00")
    (tmp_path / "tests" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "tests" / "deep")
    return tmp_path


def test_names_and_latest_from_a_subdirectory(project: Path) -> None:
    out = project / "out"
    assert resolve_run("older") == out / "older"
    assert resolve_run("latest") == out / "newer"  # no link: the latest started_at
    os.symlink("older", out / "latest")  # the plugin's link wins
    assert resolve_run("latest") == (out / "older").resolve()
    assert resolve_run(str(out / "newer")) == out / "newer"
    assert newest_run(out) == out / "newer"  # the link itself is not a candidate


def test_not_found_is_one_line_naming_what_was_looked_for(project: Path, tmp_path: Path) -> None:
    with pytest.raises(ReportError) as info:
        resolve_run("nope")
    text = str(info.value)
    assert "\n" not in text and "nope" in text and str(project / "out") in text
    with pytest.raises(ReportError, match="latest: no run found"):
        resolve_run("latest", out=tmp_path / "empty")
    with pytest.raises(ReportError, match="not a run directory"):
        resolve_run("a/b/c")


def test_out_option_overrides_the_ini(project: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    _run(other, "mine", "2026-03-01T00:00:00+00:00")
    assert resolve_run("latest", out=other) == other / "mine"
    assert resolve_run("mine", out=other) == other / "mine"


def test_cli_takes_names_latest_and_out(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", "summary"]) == 0  # default --run latest
    assert "run-newer" in capsys.readouterr().out
    assert cli.main(["report", "summary", "--run", "older", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["run_id"] == "run-older"
    assert cli.main(["gate", "--baseline", "newer", "--candidate", "older"]) == 1
    assert "REGRESSION" in capsys.readouterr().out
    assert cli.main(["report", "paired", "--run-a", "older", "--run-b", "latest"]) == 0
    capsys.readouterr()
    assert cli.main(["report", "summary", "--run", "ghost"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ghost" in err
    assert cli.main(["report", "html", "--run", "older"]) == 0
    assert (project / "out" / "older" / "report.html").is_file()
    assert "report.html" in capsys.readouterr().out


def test_out_given_a_report_file_points_to_output(project: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", "summary", "--out", "summary.md"]) == 2
    assert "--output FILE" in capsys.readouterr().err
    assert cli.main(["report", "summary", "--output", "summary.md"]) == 0
    assert Path("summary.md").read_text().startswith("# Run summary")


def test_a_misspelled_run_name_gets_a_did_you_mean(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Report commands and replay resolve run names the same way (issue 22 polish)."""
    with pytest.raises(ReportError, match=r"\(did you mean 'newer'\?\)$"):
        resolve_run("nwer")
    with pytest.raises(ReportError, match=r"\(runs there: newer, older\)$"):
        resolve_run("zzz")
    from pytest_agentbench.cli.main import main

    assert main(["replay", "--run", "oldr", "--task", "t0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.rstrip().endswith("(did you mean 'older'?)"), err
