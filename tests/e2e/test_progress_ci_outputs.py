"""Live progress, CI artefacts and --durations of real plugin runs (issue 11, points 7 and 9).

A tiny synthetic suite on the local sandbox (tests/support/tiny_pack.py), run in pytester's
process (xdist's workers are subprocesses either way): phase lines at -v, steps at -vv, log
records at --log-cli-level=INFO, nothing extra at default verbosity; junit properties and
pytest-json-report metadata, in one process and under `-n 2`; --durations split between setup
and call; the report.html line; the tail of a failed setup command in the ERROR text. One Docker
run checks progress under xdist with the real runner image.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.support.plugin_runs import PluginRunner
from tests.support.tiny_pack import Pack, attempts, by_task, only_run_dir, output, run_suite

SECRET = "sk-progresstestsecret0123456789"
BAD_SETUP = f"for i in $(seq 1 30); do echo err line $i >&2; done; echo {SECRET} >&2; exit 3"


def with_setup(path: Path, command: str) -> None:
    path.write_text(path.read_text() + f"setup:\n  commands: [{json.dumps(command)}]\n")


@pytest.fixture
def pack(pytester: pytest.Pytester) -> Pack:
    pack = Pack(pytester.path)
    with_setup(pack.task("good-a"), "sleep 1.2")  # long enough for the xdist tail to see it
    with_setup(pack.task("bad-setup"), BAD_SETUP)
    return pack


def progress_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if line.startswith("agentbench ")]


def junit_cases(path: Path) -> dict[str, dict[str, str]]:
    """Each testcase's name -> its properties."""
    root = ET.parse(path).getroot()
    return {
        case.attrib["name"]: {p.attrib["name"]: p.attrib["value"] for p in case.iter("property")}
        for case in root.iter("testcase")
    }


def json_metadata(path: Path) -> dict[str, dict[str, Any]]:
    tests = json.loads(path.read_text())["tests"]
    return {t["nodeid"].rpartition("::")[2]: t.get("metadata", {}).get("agentbench") for t in tests}


def durations(result: pytest.RunResult) -> dict[tuple[str, str], float]:
    """--durations=0 lines: (when, test name) -> seconds."""
    found = {}
    for line in result.stdout.lines:
        match = re.match(r"^(\d+\.\d+)s (setup|call|teardown)\s+\S+::(\S+)$", line)
        if match:
            found[(match.group(2), match.group(3))] = float(match.group(1))
    return found


def check_ci_outputs(pytester: pytest.Pytester) -> None:
    """junit properties and JSON metadata of both attempts name the run, its absolute
    directory, each attempt's id, reason, artifact directory and phase durations."""
    run_dir = only_run_dir(pytester).absolute()
    records = by_task(attempts(run_dir))
    cases, meta = junit_cases(pytester.path / "j.xml"), json_metadata(pytester.path / "r.json")
    for task, reason in (("good-a", "PASSED"), ("bad-setup", "SETUP_FAILED")):
        props, facts, record = cases[task], meta[task], records[task]
        assert props["agentbench.run_id"] == facts["run_id"] == run_dir.name
        assert props["agentbench.run_dir"] == facts["run_dir"] == str(run_dir)
        assert props["agentbench.attempt_id"] == facts["attempt_id"] == record["attempt_id"]
        assert props["agentbench.reason"] == facts["reason"] == reason
        assert Path(props["agentbench.artifacts"]) == Path(facts["artifacts"]) == (
            run_dir / "tasks" / task)
        assert Path(facts["artifacts"], "task.yaml").is_file()
        assert float(props["agentbench.duration.setup"]) == facts["phase_durations"]["setup"] == (
            record["timings"]["setup"])
    assert cases["bad-setup"]["agentbench.sub_reason"] == "SETUP_COMMAND_FAILED"
    assert set(meta["good-a"]["phase_durations"]) == {
        "prepare", "setup", "baseline", "agent", "score"}


def test_v_shows_phases_and_ci_outputs_carry_harness_data(
    pytester: pytest.Pytester, pack: Pack
) -> None:
    result = run_suite(pytester, "-v", "--durations=0", "--junitxml=j.xml", "--json-report",
                       "--json-report-file=r.json")
    result.assert_outcomes(passed=1, errors=1)
    lines = progress_lines(result)
    for phase in ("prepare", "setup", "baseline", "agent", "score"):
        assert any(line.startswith(f"agentbench good-a: {phase} (+") for line in lines), lines
    assert any(line.startswith("agentbench bad-setup: setup failed") for line in lines), lines
    assert not any("agent step" in line for line in lines)  # steps need -vv
    check_ci_outputs(pytester)

    # --durations: the agent's and scoring's time is the call's, the rest stays in setup
    record = by_task(attempts(only_run_dir(pytester)))["good-a"]
    timed = durations(result)
    agent_score = record["timings"]["agent"] + record["timings"]["score"]
    assert timed[("call", "good-a")] >= agent_score - 0.01
    assert timed[("setup", "good-a")] >= record["timings"]["setup"] - 0.01  # the sleep
    assert timed[("setup", "good-a")] + timed[("call", "good-a")] >= record["duration_sec"] - 0.02
    assert timed[("setup", "bad-setup")] > 0  # an ERROR at setup: no call, all its time here
    assert ("call", "bad-setup") not in timed

    # the run's report.html, printed as pytest-html does
    html = only_run_dir(pytester).absolute() / "report.html"
    result.stdout.fnmatch_lines([f"*Generated agentbench html report: {html.as_uri()}*"])

    # the failed setup command's tail in the ERROR text, redacted
    text = output(result)
    assert "last 15 lines of its stderr:" in text and "    err line 30" in text
    assert "    err line 15" not in text
    assert SECRET not in text


def test_default_verbosity_shows_nothing_extra_and_vv_shows_steps(
    pytester: pytest.Pytester, pack: Pack
) -> None:
    quiet = run_suite(pytester, "-k", "good-a", "--agentbench-out=quiet")
    quiet.assert_outcomes(passed=1, deselected=1)
    assert progress_lines(quiet) == [] and "pytest_agentbench.progress" not in output(quiet)
    loud = run_suite(pytester, "-k", "good-a", "-vv", "--agentbench-out=loud")
    assert "agentbench good-a: agent step 1: apply_patch" in "\n".join(progress_lines(loud))


def test_log_cli_level_info_shows_progress_as_log_records(
    pytester: pytest.Pytester, pack: Pack
) -> None:
    result = run_suite(pytester, "-k", "good-a", "--log-cli-level=INFO")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines([
        "*live log setup*",
        "INFO *pytest_agentbench.progress*good-a: prepare (+*",
        "INFO *pytest_agentbench.progress*good-a: agent step 1: apply_patch (+*",
    ])
    assert progress_lines(result) == []  # the records, not the lines twice


def test_xdist_progress_reaches_the_controller_and_ci_outputs_travel(
    pytester: pytest.Pytester, pack: Pack
) -> None:
    result = run_suite(pytester, "-n", "2", "-v", "--durations=0", "--junitxml=j.xml",
                       "--json-report", "--json-report-file=r.json")
    result.assert_outcomes(passed=1, errors=1)
    lines = progress_lines(result)
    assert any(re.match(r"agentbench \[gw[01]\] good-a: setup \(\+", line) for line in lines), (
        result.stdout.str())
    # a progress line of an attempt never comes after that attempt's result line
    stdout = result.stdout.str()
    result_at = stdout.index("PASSED taskpacks/synth/good-a")
    assert all(stdout.index(line) < result_at for line in lines if "good-a" in line)
    check_ci_outputs(pytester)
    timed = durations(result)
    assert timed[("call", "good-a")] > 0 and timed[("setup", "good-a")] >= 1.2


def test_docker_progress_under_xdist(docker_client: Any, tmp_path: Path) -> None:
    run = PluginRunner(tmp_path).run("-n", "2", "-v", "-k", "fix-mean-off-by-one")
    run.assert_outcomes(passed=1)  # under xdist the workers deselect: not counted
    lines = [line for line in run.stdout.splitlines() if line.startswith("agentbench [gw")]
    for phase in ("prepare", "setup", "baseline"):
        assert any(f"fix-mean-off-by-one: {phase} (+" in line for line in lines), run.tail()
