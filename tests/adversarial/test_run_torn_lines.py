"""Issue 8 item 7 (records): a line torn by a writer killed mid-write must cost no record.

On 4a9ba26 a resume appended its first record onto the fragment the killed controller left at
the end of attempts.jsonl: one invalid line, and the new record lost with it. Now the writer sets
a fragment aside in `<file>.torn` before appending, readers skip and report a torn last line,
and a session-end step that fails is one line on the terminal, never a lost report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pytest_agentbench.core.rundir as rundir
from pytest_agentbench.run.verdict import INFRA_ERROR
from pytest_agentbench.schemas.records import AttemptRecord
from tests.support.run_dirs import run_dirs
from tests.support.tiny_pack import Pack

FRAGMENT = '{"attempt_id": "x", "task_id": "b-task", "resu'  # a record cut mid-write


# --------------------------------------------------------------------------- the writer


def test_append_after_a_torn_line_sets_the_fragment_aside(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    path.write_text(json.dumps({"n": 1}) + "\n" + FRAGMENT)
    rundir.append_jsonl(path, {"n": 2})
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"n": 1}, {"n": 2}]
    assert (tmp_path / "attempts.jsonl.torn").read_text() == FRAGMENT + "\n"


def test_a_whole_record_that_lost_only_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    path.write_text(json.dumps({"n": 1}))
    rundir.append_jsonl(path, {"n": 2})
    assert [json.loads(x) for x in path.read_text().splitlines()] == [{"n": 1}, {"n": 2}]
    assert not (tmp_path / "attempts.jsonl.torn").exists()


def test_a_file_that_is_only_a_fragment(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(FRAGMENT)
    note = rundir.repair_jsonl(path)
    assert note is not None and "torn" in note and "events.jsonl.torn" in note
    assert path.read_text() == ""
    assert rundir.repair_jsonl(path) is None  # idempotent


def test_readers_skip_and_report_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    path.write_text(json.dumps({"n": 1}) + "\n" + FRAGMENT)
    problems: list[str] = []
    assert rundir.read_jsonl(path, problems) == [{"n": 1}]
    assert len(problems) == 1 and "torn last line" in problems[0]


# --------------------------------------------------------------------------- a real resume


@pytest.fixture
def suite(pytester: pytest.Pytester) -> Path:
    """taskpacks/synth: two tasks the oracle solves, on one local repository."""
    pack = Pack(pytester.path)
    for task_id in ("a-task", "b-task"):
        pack.task(task_id)
    return pack.root


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--agentbench-sandbox", "local", *args
    )


def _records(run_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for line in (run_dir / "attempts.jsonl").read_text("utf-8").splitlines():
        AttemptRecord.model_validate_json(line)  # every line is a whole, valid record
        rows.append(json.loads(line))
    return rows


def test_resume_after_a_controller_killed_mid_write(pytester: pytest.Pytester, suite: Path) -> None:
    first = _run(pytester, "--agentbench-suite", "synth", "-k", "a-task")
    assert first.ret == 0, first.stdout.str()
    (run_dir,) = run_dirs(pytester.path / "reports" / "runs")
    assert [r["task_id"] for r in _records(run_dir)] == ["a-task"]
    with (run_dir / "attempts.jsonl").open("a") as handle:
        handle.write(FRAGMENT)  # the controller died here, in the middle of b-task's line
    with (run_dir / "events.jsonl").open("a") as handle:
        handle.write('{"type": "task_sta')  # and in the middle of merging events

    second = _run(pytester, f"--agentbench-resume={run_dir}")
    text = second.stdout.str() + second.stderr.str()
    assert second.ret == 0, text
    assert sorted(r["task_id"] for r in _records(run_dir)) == ["a-task", "b-task"]  # none lost
    assert (run_dir / "attempts.jsonl.torn").read_text() == FRAGMENT + "\n"  # none dropped
    events = (run_dir / "events.jsonl").read_text("utf-8").splitlines()
    assert all(isinstance(json.loads(line), dict) for line in events)
    assert "attempts.jsonl: torn last line" in text  # said, not silently repaired
    assert (run_dir / "report.html").is_file() and (run_dir / "report_summary.md").is_file()


# --------------------------------------------------------------------------- the run's end

FAULTY_EVENTS = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    ab = session.config.pluginmanager.get_plugin("agentbench-run")
    if ab is not None and ab.state is not None and not hasattr(session.config, "workerinput"):
        # a part that cannot be read: merging the events fails at session end
        (ab.state.path / "events" / "zz-unreadable.jsonl").mkdir(parents=True)
"""


def test_a_failing_session_end_step_costs_no_report(pytester: pytest.Pytester, suite: Path) -> None:
    pytester.makeconftest(FAULTY_EVENTS)
    result = _run(pytester, "--agentbench-suite", "synth")
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text, text
    assert result.ret == INFRA_ERROR, text  # the records are whole, the run's end was not
    (run_dir,) = run_dirs(pytester.path / "reports" / "runs")
    assert len(_records(run_dir)) == 2
    assert (run_dir / "report.html").is_file() and (run_dir / "report_summary.md").is_file()
    failed = [line for line in text.splitlines() if line.startswith("agentbench: session end:")]
    assert len(failed) == 1 and "merge events" in failed[0], text
    assert "merge events" in (run_dir / "report_error.txt").read_text()
