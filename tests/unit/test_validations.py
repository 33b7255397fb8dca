"""The kept validation results (reporting/validations.py) and the task fingerprint
(tasks/fingerprint.py): a score is shown only for the content and commit it was validated at;
anything else gives no score and one line naming the file and what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.reporting.validations import lookup, run_fingerprint, write_validation
from pytest_agentbench.tasks.fingerprint import FINGERPRINT_FILE, task_fingerprint

ADEQUACY = {"score": 0.43, "caught": 3, "survived": 4, "graded": 7, "threshold": 0.6,
            "flagged": True, "mutants": []}


def _task(tmp_path: Path) -> Path:
    task = tmp_path / "tp" / "s" / "t"
    task.mkdir(parents=True)
    (task / "task.yaml").write_text("id: t\n")
    (task / "oracle.patch").write_text("diff --git a/x b/x\n")
    return task


def test_the_fingerprint_follows_every_file_of_the_task(tmp_path: Path) -> None:
    task = _task(tmp_path)
    first = task_fingerprint(task)
    assert first.startswith("sha256:") and task_fingerprint(task) == first
    (task / "__pycache__").mkdir()
    (task / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert task_fingerprint(task) == first  # a cache is no task content
    (task / "oracle.patch").write_text("diff --git a/y b/y\n")
    changed = task_fingerprint(task)
    assert changed != first
    (task / "hidden.patch").write_text("")
    assert task_fingerprint(task) not in (first, changed)
    (task / "link").symlink_to("/etc/passwd")  # named by its target, never read
    assert task_fingerprint(task) != changed


def _entry(fingerprint: str, adequacy: dict[str, Any] | None = ADEQUACY) -> dict[str, Any]:
    return {"ok": True, "fingerprint": fingerprint, "task_commit": "abc123",
            "validated_at": "2026-11-27T17:00:00+00:00", "adequacy": adequacy}


def test_a_score_of_the_same_content_is_shown_flagged(tmp_path: Path) -> None:
    fp = task_fingerprint(_task(tmp_path))
    write_validation(tmp_path / "out", "s", "t", _entry(fp))
    view = lookup(tmp_path / "out", "s", "t", fp, "abc123")
    assert (view.score, view.flagged, view.caught, view.graded, view.note) == (
        0.43, True, 3, 7, "")
    assert view.cell() == "0.43 weak tests"
    assert lookup(tmp_path / "out", "s", "t", fp, "").score == 0.43  # no commit known


@pytest.mark.parametrize("fingerprint,commit,why", [
    ("sha256:other", "abc123", "validated other task content"),
    (None, "abc123", "the run recorded no task fingerprint"),
    ("FP", "def456", "validated commit abc123, the run's def456"),
])
def test_a_stale_or_unmatched_score_is_not_shown(tmp_path: Path, fingerprint: str | None,
                                                  commit: str, why: str) -> None:
    fp = task_fingerprint(_task(tmp_path))
    write_validation(tmp_path / "out", "s", "t", _entry(fp))
    view = lookup(tmp_path / "out", "s", "t", fp if fingerprint == "FP" else fingerprint, commit)
    assert view.score is None and view.cell() == "—"
    assert view.note.startswith("t: out/.validation/s/t.json") and why in view.note, view.note


@pytest.mark.parametrize("text,why", [
    ("{not json", "not JSON"),
    ('{"schema": "other"}', "not an agentbench.validation file (field 'schema')"),
    ('{"schema": "agentbench.validation", "schema_version": 9}', "field 'schema_version' is 9"),
    (json.dumps({"schema": "agentbench.validation", "schema_version": 1, "fingerprint": "F",
                 "adequacy": {"score": "high", "threshold": 0.6}}),
     "field 'adequacy.score' or 'adequacy.threshold' is not a share"),
    (json.dumps({"schema": "agentbench.validation", "schema_version": 1, "fingerprint": "F",
                 "adequacy": [1]}), "field 'adequacy' is not an adequacy result"),
])
def test_an_unreadable_file_gives_no_score_and_one_line(tmp_path: Path, text: str,
                                                        why: str) -> None:
    path = tmp_path / "out" / ".validation" / "s" / "t.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    view = lookup(tmp_path / "out", "s", "t", "F", None)
    assert view.score is None and why in view.note and "\n" not in view.note, view.note


def test_a_linked_file_is_not_followed_and_no_file_says_nothing(tmp_path: Path) -> None:
    assert lookup(tmp_path / "out", "s", "t", "F", None).note == ""
    real = tmp_path / "elsewhere.json"
    write_validation(tmp_path, "x", "y", _entry("F"))
    (tmp_path / ".validation" / "x" / "y.json").rename(real)
    path = tmp_path / "out" / ".validation" / "s" / "t.json"
    path.parent.mkdir(parents=True)
    path.symlink_to(real)
    view = lookup(tmp_path / "out", "s", "t", "F", None)
    assert view.score is None and "a symbolic link" in view.note
    assert lookup(tmp_path / "out", "../s", "t", "F", None).note == ""  # no such name


def test_a_validation_without_adequacy_keeps_the_earlier_score(tmp_path: Path) -> None:
    write_validation(tmp_path, "s", "t", _entry("F"))
    write_validation(tmp_path, "s", "t", {**_entry("F", None), "validated_at": "later"})
    kept = json.loads((tmp_path / ".validation" / "s" / "t.json").read_text())
    assert kept["adequacy"]["score"] == 0.43 and kept["validated_at"] == "later"
    assert lookup(tmp_path, "s", "t", "F", None).validated_at == "2026-11-27T17:00:00+00:00"
    write_validation(tmp_path, "s", "t", _entry("G", None))  # other content: nothing kept
    assert json.loads((tmp_path / ".validation" / "s" / "t.json").read_text())["adequacy"] \
        is None


def test_the_run_fingerprint_is_read_from_the_attempt_folder(tmp_path: Path) -> None:
    (tmp_path / "tasks" / "t").mkdir(parents=True)
    assert run_fingerprint(tmp_path, "tasks/t") is None
    (tmp_path / "tasks" / "t" / FINGERPRINT_FILE).write_text("sha256:ab\n")
    assert run_fingerprint(tmp_path, "tasks/t") == "sha256:ab"
    assert run_fingerprint(tmp_path, "") is None
