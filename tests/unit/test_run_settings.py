"""RunSettings from option and ini lookups, without pytest's config (run/settings.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.run.settings import OutDirError, RunSettings, build_settings


def settings(
    tmp_path: Path, options: dict[str, Any] | None = None, ini: dict[str, Any] | None = None,
    suites: list[str] | None = None,
) -> RunSettings:
    options = {"out": str(tmp_path / "runs"), **(options or {})}
    return build_settings(
        options.get, (ini or {}).get, suites=["b", "a", "b"] if suites is None else suites,
        rootpath=tmp_path,
    )


def test_defaults_are_typed_and_final(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./taskpacks here: the default is under the rootdir
    s = settings(tmp_path)
    assert s.suites == ("a", "b")
    assert s.taskpacks == tmp_path / "taskpacks"
    assert (s.variant.name, s.attempts, s.quarantine, s.sandbox) == ("oracle", 1, "run", "docker")
    assert s.out == (tmp_path / "runs").resolve() and s.out_label == "--agentbench-out"
    assert s.resume is None and s.image is None and s.git_cache is None and s.llm == {}
    assert s.docker and not s.full_logs and not s.keep_workspace
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.attempts = 2  # type: ignore[misc]


def test_the_command_line_wins_over_the_ini_file(tmp_path: Path) -> None:
    ini = {"variant": "nop", "attempts": "3", "quarantine": "skip", "image": "img:ini"}
    from_ini = settings(tmp_path, ini=ini)
    assert (from_ini.variant.name, from_ini.attempts, from_ini.quarantine) == ("nop", 3, "skip")
    assert from_ini.image == "img:ini"
    given = settings(tmp_path, {"variant": "oracle", "attempts": 2, "image": "img:cli"}, ini)
    assert (given.variant.name, given.attempts, given.image) == ("oracle", 2, "img:cli")


@pytest.mark.parametrize("attempts", ["0", "x", "-1"])
def test_attempts_must_be_a_positive_integer(tmp_path: Path, attempts: str) -> None:
    expected = r"agentbench_attempts \(ini\): expected a positive integer"
    with pytest.raises(ValueError, match=expected):
        settings(tmp_path, ini={"attempts": attempts})


def test_a_quarantine_mode_outside_run_skip_only_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"^agentbench_quarantine \(ini\): expected one of run, skip, only, "
        r"got 'sikp'$"
    ):
        settings(tmp_path, ini={"quarantine": "sikp"})
    with pytest.raises(ValueError, match=r"^--agentbench-quarantine: expected one of run, skip"):
        settings(tmp_path, {"quarantine": "all"}, {"quarantine": "skip"})
    assert settings(tmp_path, {"quarantine": "only"}, {"quarantine": "sikp"}).quarantine == "only"


def test_a_loopback_base_url_means_the_local_preset(tmp_path: Path) -> None:
    s = settings(tmp_path, {"base_url": "http://127.0.0.1:8000/v1", "temperature": 0.0})
    assert s.llm == {"base_url": "http://127.0.0.1:8000/v1", "temperature": 0.0, "preset": "local"}
    assert s.variant_hash() != settings(tmp_path).variant_hash()  # CLI model options count


def test_an_out_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(OutDirError, match="is a file"):
        settings(tmp_path, {"out": str(tmp_path / "file")})


def test_resume_without_suites_takes_those_of_the_run_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"suites": ["z", "y"]}))
    s = settings(tmp_path, {"resume": str(run_dir)}, suites=[])
    assert s.suites == ("y", "z") and s.resume == run_dir
    with pytest.raises(ValueError, match="not a readable run directory"):
        settings(tmp_path, {"resume": str(tmp_path / "nowhere")}, suites=[])


def test_only_a_run_directory_no_attempt_wrote_in_is_discarded(tmp_path: Path) -> None:
    from pytest_agentbench.run.state import RunState, discard_empty_run

    def made(*names: str) -> RunState:
        run_dir = tmp_path / "-".join(names)
        run_dir.mkdir()
        for name in names:
            (run_dir / name).mkdir() if name in ("tasks", "events") else (run_dir / name).touch()
        return RunState("r", str(run_dir), "h", "t")

    assert discard_empty_run(made("run.json", "report.html", "report_summary.md"))
    kept = [made("run.json", "tasks"), made("run.json", "events"),
            made("run.json", "report_error.txt")]
    assert not any(discard_empty_run(state) for state in kept)
    assert all(state.path.is_dir() for state in kept)
    resumed = made("run.json", "report.html")
    resumed.resumed = True
    assert not discard_empty_run(resumed) and resumed.path.is_dir()


def test_engines_from_the_option_the_ini_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTBENCH_ENGINES", "default; ssh://ci@box,slots=2")
    assert settings(tmp_path).engines == ("default", "ssh://ci@box,slots=2")
    assert settings(tmp_path, ini={"engines": ["ctx1"]}).engines == ("ctx1",)
    assert settings(tmp_path, {"engine": ["tcp://h:2376", "ctx2,slots=1"]},
                    ini={"engines": ["ctx1"]}).engines == (
        "tcp://h:2376", "ctx2,slots=1")
    monkeypatch.delenv("AGENTBENCH_ENGINES")
    assert settings(tmp_path).engines == () and settings(tmp_path).retry_infra == 0
    assert settings(tmp_path, {"retry_infra": 2}).retry_infra == 2
    assert settings(tmp_path, ini={"retry_infra": "1"}).retry_infra == 1


@pytest.mark.parametrize("kwargs, words", [
    ({"options": {"engine": ["ctx,slots=0"]}}, "--agentbench-engine"),
    ({"options": {"engine": ["a", "a"]}}, "--agentbench-engine"),
    ({"ini": {"engines": ["http://x"]}}, "agentbench_engines (ini)"),
    ({"options": {"retry_infra": -1}}, "--agentbench-retry-infra"),
    ({"ini": {"retry_infra": "two"}}, "agentbench_retry_infra (ini)"),
])
def test_bad_engines_and_retries_are_one_line(tmp_path: Path, kwargs: dict[str, Any],
                                              words: str) -> None:
    with pytest.raises(ValueError, match="^" + words.replace("(", r"\(").replace(")", r"\)")) \
            as info:
        settings(tmp_path, **kwargs)
    assert "\n" not in str(info.value)
