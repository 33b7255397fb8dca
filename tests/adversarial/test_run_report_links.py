"""Issue 20 item 7: the HTML drill-down of a downloaded run never follows a link.

A run directory is data from elsewhere (a CI artifact, a colleague's upload). Its
`agent/tool_calls.jsonl` and `agent/conversation.jsonl` as symlinks to a host file put that
file (the password file, in the review) into report.html. Every file the drill-down reads is
now opened without following links, component by component from the run directory, regular
files only and capped; a linked one is shown as "not shown: ..." instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_agentbench.reporting.html.run_page import write_html
from tests.support.synthetic import make_record, write_artifacts, write_run

SECRET = "AGENTBENCH-SECRET-MARKER-7f3a"


def downloaded_run(tmp_path: Path) -> tuple[Path, Path]:
    """A run of one attempt with its drill-down artifacts, and its task directory."""
    record = make_record("r1", "task-a", "custom-dev", "v", 0, 1, False, "TESTS_FAILED", 2, 9.0)
    run = write_run(tmp_path / "run", [record])
    write_artifacts(run, record)
    return run, run / record["artifact_paths"]["task_dir"]


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "passwd"
    path.parent.mkdir()
    path.write_text(
        f'{{"role": "user", "content": "{SECRET}", "tool": "{SECRET}"}}\n{SECRET}\n')
    return path


def test_linked_agent_logs_are_not_embedded(tmp_path: Path, secret: Path) -> None:
    """issue 20 item 7: tool_calls.jsonl and conversation.jsonl linked to a host file."""
    run, task = downloaded_run(tmp_path)
    for name in ("tool_calls.jsonl", "conversation.jsonl"):
        (task / "agent" / name).unlink()
        (task / "agent" / name).symlink_to(secret)
    html = write_html(run).read_text(encoding="utf-8")
    assert SECRET not in html
    assert "not shown: " in html


def test_links_inside_the_run_and_linked_folders_are_not_followed(
    tmp_path: Path, secret: Path
) -> None:
    """issue 20 item 7: a relative link that climbs out, a linked `agent`, `diffs` and `logs`
    folder, a patch and a log linked out, the context manifest linked out."""
    run, task = downloaded_run(tmp_path)
    (task / "agent" / "conversation.jsonl").unlink()
    (task / "agent" / "conversation.jsonl").symlink_to(os.path.relpath(secret, task / "agent"))
    (task / "diffs" / "step_0001.patch").unlink()
    (task / "diffs" / "step_0001.patch").symlink_to(secret)
    (task / "logs").mkdir(exist_ok=True)
    (task / "logs" / "passing.txt").symlink_to(secret)
    (task / "agent" / "context_manifest.json").symlink_to(secret)
    html = write_html(run).read_text(encoding="utf-8")
    assert SECRET not in html
    for sub in ("agent", "diffs"):  # whole folders linked to a copy outside
        outside = tmp_path / f"outside-{sub}"
        (task / sub).rename(outside)
        (task / sub).symlink_to(outside)
    (outside := tmp_path / "outside-agent").joinpath("tool_calls.jsonl").write_text(
        f'{{"tool": "{SECRET}"}}\n')
    html = write_html(run).read_text(encoding="utf-8")
    assert SECRET not in html


def test_a_fifo_in_the_run_does_not_hang_the_report(tmp_path: Path) -> None:
    """issue 20 item 7: a FIFO where a log should be is shown as not shown, never opened."""
    run, task = downloaded_run(tmp_path)
    (task / "agent" / "tool_calls.jsonl").unlink()
    os.mkfifo(task / "agent" / "tool_calls.jsonl")
    html = write_html(run).read_text(encoding="utf-8")
    assert "not shown: " in html


def test_ordinary_artifacts_are_still_shown(tmp_path: Path) -> None:
    run, _task = downloaded_run(tmp_path)
    html = write_html(run).read_text(encoding="utf-8")
    assert "Step 2: reading src/mod.py" in html and "step_0002.patch" in html
    assert "not shown: " not in html
