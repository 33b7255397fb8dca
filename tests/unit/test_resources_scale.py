"""--agentbench-resources-scale F: checked (one line for a bad value), applied to every sandbox
but setup's, recorded with the values applied; and the OOM kills an attempt counts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.core.attempt_config import sandbox_spec, scaled_resources
from pytest_agentbench.core.attempt_record import limits_of
from pytest_agentbench.core.oom_count import oom_kills
from pytest_agentbench.run.settings import build_settings
from pytest_agentbench.schemas.records import Result
from pytest_agentbench.schemas.task import EnvironmentSpec, TaskSpec
from pytest_agentbench.schemas.taxonomy import Reason
from tests.support.attempts import attempt_config


def _settings(tmp_path: Path, scale: Any) -> Any:
    options = {"out": str(tmp_path / "runs"), "resources_scale": scale}
    return build_settings(options.get, {}.get, suites=["s"], rootpath=tmp_path)


def _spec(**environment: Any) -> TaskSpec:
    return TaskSpec.model_validate({
        "task_spec_version": 1, "id": "t1", "suite": "s",
        "repo": {"url": "https://example.com/r.git", "commit": "a" * 40},
        "environment": {"cpu_limit": 2, "mem_limit_mb": 4096, "pids_limit": 512,
                        "disk_limit_mb": 1024, **environment},
        "validation": {"failing_command": "pytest -q", "passing_command": "pytest -q"},
    })


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "inf", "65", "1e400", "", "0.5x"])
def test_a_bad_scale_is_one_line(tmp_path: Path, value: str) -> None:
    if value == "":
        assert _settings(tmp_path, value).resources_scale == 1.0  # empty: the default
        return
    with pytest.raises(ValueError) as err:
        _settings(tmp_path, value)
    text = str(err.value)
    assert "\n" not in text and text.startswith(
        "--agentbench-resources-scale: expected a number above 0 and at most 64")
    assert text.endswith(f"got {value!r}")


def test_the_scale_as_given(tmp_path: Path) -> None:
    assert _settings(tmp_path, None).resources_scale == 1.0
    assert _settings(tmp_path, "0.5").resources_scale == 0.5
    assert _settings(tmp_path, "2").resources_scale == 2.0


def test_pytest_says_a_bad_scale_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--agentbench-suite", "s",
         f"--agentbench-out={tmp_path / 'runs'}", "--agentbench-resources-scale", "zero"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 4, proc.stderr[-2000:]
    assert lines == ["ERROR: --agentbench-resources-scale: expected a number above 0 and at "
                     "most 64 (0.5 halves every task's CPU and memory limits), got 'zero'"]


def test_every_sandbox_but_setup_gets_the_scaled_limits(tmp_path: Path) -> None:
    spec = _spec()
    cfg = attempt_config(tmp_path, resources_scale=0.5)
    limits = {phase: sandbox_spec(cfg, spec, tmp_path / "w", False, phase)
              for phase in ("setup", "agent", "score", "baseline", "regrade")}
    assert (limits["setup"].cpu_limit, limits["setup"].mem_limit_mb) == (2.0, 4096)
    for phase in ("agent", "score", "baseline", "regrade"):
        got = limits[phase]
        assert (got.cpu_limit, got.mem_limit_mb, got.pids_limit, got.disk_limit_mb) == (
            1.0, 2048, 512, 1024), phase
    unscaled = sandbox_spec(attempt_config(tmp_path), spec, tmp_path / "w", False, "agent")
    assert (unscaled.cpu_limit, unscaled.mem_limit_mb) == (2.0, 4096)


def test_scaled_limits_have_floors() -> None:
    env = EnvironmentSpec(cpu_limit=0.5, mem_limit_mb=100)
    assert scaled_resources(env, 0.01) == (0.01, 64)
    assert scaled_resources(env, 3) == (1.5, 300)
    assert scaled_resources(env, 1.0) == (0.5, 100)


def test_the_record_carries_the_policy_and_the_scale() -> None:
    limits = limits_of(_spec(), resources_scale=0.5, oom_kills=2)
    assert (limits.cpu_limit, limits.mem_limit_mb, limits.pids_limit, limits.disk_limit_mb,
            limits.mem_reservation_mb, limits.resources_scale, limits.oom_kills) == (
        1.0, 2048, 512, 1024, None, 0.5, 2)
    old = {"timeout_sec": 9.0, "tool_timeout_sec": 1.0, "max_steps": 3, "cpu_limit": 2.0,
           "mem_limit_mb": 64}
    read = type(limits).model_validate(old)  # a record written before these fields
    assert read.pids_limit is None and read.resources_scale is None and read.oom_kills is None


def _event(attempt: str, type_: str, **payload: Any) -> str:
    return json.dumps({"attempt_id": attempt, "type": type_, **payload}) + "\n"


def test_oom_kills_of_one_attempt(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    mine, other = "run:t1:v:0", "run:t2:v:0"
    lines = [_event(mine, "task_started"),  # an earlier attempt with the same id: not read
             _event(mine, "command_finished", oom_killed=True),
             _event(mine, "task_finished"),
             _event(mine, "task_started"),
             _event(other, "command_finished", oom_killed=True),  # another attempt's
             _event(mine, "command_finished", oom_killed=True),
             _event(mine, "command_finished", oom_killed=False),
             "x" * 70_000 + "\n",  # a line longer than a read chunk
             _event(mine, "command_finished", oom_killed=True)]
    events.write_text("".join(lines))
    calls = tmp_path / "tool_calls.jsonl"
    calls.write_text("".join(json.dumps({"step": i, "result": {"data": {"oom_killed": oom}}})
                             + "\n" for i, oom in enumerate((True, False, True))))
    passed = Result(passed=True)
    assert oom_kills(events, mine, calls, passed) == 2 + 2
    killed = Result(passed=False, failure_reason=Reason.AGENT_KILLED_SANDBOX, sub_reason="OOM")
    assert oom_kills(events, mine, calls, killed) == 5
    assert oom_kills(None, mine, tmp_path / "missing.jsonl", passed) == 0


def test_run_json_records_the_scale_and_a_resume_keeps_it(tmp_path: Path) -> None:
    from pytest_agentbench.plugin.resume import recorded_options
    from pytest_agentbench.run.state import run_config

    config = run_config(_settings(tmp_path, "0.5"), "img")
    assert config["resources_scale"] == 0.5
    assert "resources_scale" not in run_config(_settings(tmp_path, None), "img")  # hash kept
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"config": config}))
    assert recorded_options(run_dir)["resources_scale"] == 0.5
