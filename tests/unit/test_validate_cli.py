"""`agentbench validate-tasks` finds the project's taskpacks from any subdirectory."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from pytest_agentbench.cli.validate import add_validate_command

REPO = Path(__file__).resolve().parents[2]


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_validate_command(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def _project(root: Path, ini: str) -> None:
    task = REPO / "taskpacks" / "custom-dev" / "fix-mean-off-by-one"
    shutil.copytree(task, root / "packs" / "custom-dev" / task.name)
    shutil.copytree(REPO / "taskpacks" / "_shared", root / "packs" / "_shared")
    (root / "packs" / "custom-dev" / "broken").mkdir()
    (root / "packs" / "custom-dev" / "broken" / "task.yaml").write_text("id: broken\n")
    (root / "pytest.ini").write_text(ini)
    (root / "tests" / "deep").mkdir(parents=True)


def test_ini_taskpacks_from_a_subdirectory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    _project(tmp_path, "[pytest]\nagentbench_taskpacks = packs\n")
    monkeypatch.chdir(tmp_path / "tests" / "deep")
    args = _parse(["validate-tasks", "--suite", "custom-dev"])
    assert args.func(args) == 1  # the broken task
    out = capsys.readouterr().out
    assert "OK      fix-mean-off-by-one" in out and "INVALID" in out and "broken" in out


def test_missing_taskpacks_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    args = _parse(["validate-tasks", "--suite", "custom-dev"])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path.resolve() / "taskpacks") in err


def test_a_failed_setup_shows_the_tail_of_its_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`validate-tasks --run` said SETUP_FAILED without the stderr tail pytest shows (issue 22
    polish). The local sandbox runs the setup on the host: a command that fails loudly."""
    _project(tmp_path, "[pytest]\nagentbench_taskpacks = packs\n")
    shutil.rmtree(tmp_path / "packs" / "custom-dev" / "broken")
    spec = tmp_path / "packs" / "custom-dev" / "fix-mean-off-by-one" / "task.yaml"
    text = spec.read_text()
    assert "\nsetup:" not in text
    spec.write_text(text + "setup:\n  commands: [\"echo first >&2; echo 'no module named "
                    "frobnicate' >&2; exit 3\"]\n")
    monkeypatch.chdir(tmp_path)
    args = _parse(["validate-tasks", "--suite", "custom-dev", "--run", "--sandbox", "local"])
    assert args.func(args) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("REJECT  fix-mean-off-by-one"))
    assert "SETUP_FAILED" in lines[at]
    assert lines[at + 1:at + 4] == ["        last 2 lines of its stderr:", "          first",
                                    "          no module named frobnicate"], out
