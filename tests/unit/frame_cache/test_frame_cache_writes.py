"""Writing the frame cache (reporting/frame_cache.py): skipped where it cannot be written, no
temporary file left, the records' permissions, and only frames it can round-trip."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pytest_agentbench.reporting.frame_cache as frame_cache
from pytest_agentbench.reporting.load import load_run
from tests.support.frame_cache_runs import RUNS, frames_equal


def test_an_unwritable_directory_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            parses: list[int]) -> None:
    run = RUNS["a single record"](tmp_path / "run")
    reference = load_run(run, cache=False)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(frame_cache.tempfile, "mkstemp", refuse)
    frames_equal(reference, load_run(run))
    frames_equal(reference, load_run(run))
    assert len(parses) == 3
    assert sorted(p.name for p in run.iterdir()) == ["attempts.jsonl", "run.json"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes into read-only directories")
def test_a_read_only_directory_is_skipped(tmp_path: Path) -> None:
    run = RUNS["a single record"](tmp_path / "run")
    reference = load_run(run, cache=False)
    run.chmod(0o555)
    try:
        frames_equal(reference, load_run(run))
    finally:
        run.chmod(0o755)
    assert sorted(p.name for p in run.iterdir()) == ["attempts.jsonl", "run.json"]


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    run = RUNS["a single record"](tmp_path / "run")

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(frame_cache.os, "replace", full)
    load_run(run)
    assert sorted(p.name for p in run.iterdir()) == ["attempts.jsonl", "run.json"]


def test_the_cache_is_readable_where_the_records_are(tmp_path: Path) -> None:
    run = RUNS["a single record"](tmp_path / "run")
    (run / "attempts.jsonl").chmod(0o640)
    load_run(run)
    assert frame_cache.cache_path(run / "attempts.jsonl", "all").stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("value", [
    pytest.param(np.int64(3), id="numpy scalar"),
    pytest.param(((1, 2),), id="nested tuple"),
    pytest.param({1: "int key"}, id="int key"),
    pytest.param(object(), id="object"),
    pytest.param([b"bytes"], id="bytes"),
    pytest.param(type("Text", (str,), {})("a str subclass"), id="str subclass"),
])
def test_frames_it_cannot_round_trip_are_not_cached(tmp_path: Path, value: Any) -> None:
    path = tmp_path / "attempts.jsonl"
    path.write_text("{}\n", encoding="utf-8")
    frame = pd.DataFrame({"a": pd.Series([value, None], dtype=object)})
    assert not frame_cache.write(path, "all", {"k": 1}, frame, {})
    assert not frame_cache.cache_path(path, "all").exists()
    assert frame_cache.write(path, "all", {"k": 1}, pd.DataFrame({"a": [[1], ("x",)]}), {})


def test_frame_cache_round_trips_odd_values(tmp_path: Path) -> None:
    path = tmp_path / "attempts.jsonl"
    path.write_text("{}\n", encoding="utf-8")
    frame = pd.DataFrame({
        "obj": pd.Series([None, "a", "", "\u4e2d\u0000", "a"], dtype=object),
        "text": pd.Series(["x", None, "\ud83d", "\U0001F600", "x"], dtype="str"),
        "plain": pd.Series([None, [1.5, -0.0, 2**70], {"k": [True, None]}, (), ("a", 1)],
                           dtype=object),
        "f": [1.0, float("nan"), -0.0, float("inf"), 1e-300],
        "i": np.array([0, -1, 2**62, 3, 4], dtype=np.int64),
        "b": [True, False, True, False, True],
        "c": pd.Categorical(["x", "y", None, "x", "y"], categories=["y", "x", "z"]),
    })
    assert frame_cache.write(path, "all", {"k": 1}, frame, {"n": 1})
    schema = {name: None if column.dtype == object or isinstance(column.dtype, pd.StringDtype)
              else repr(column.dtype) for name, column in frame.items()}
    got = frame_cache.read(path, "all", {"k": 1}, schema, owner_uid=None)
    assert got is not None
    pd.testing.assert_frame_equal(frame, got[0], check_exact=True)
    assert got[1] == {"n": 1}
    assert [type(v) for v in got[0]["plain"]] == [type(v) for v in frame["plain"]]
    assert frame_cache.read(path, "all", {"k": 2}, schema) is None  # another key
    assert frame_cache.read(path, "all", {"k": 1}, dict(schema, f=None)) is None  # f is text?
    assert frame_cache.read(path, "all", {"k": 1}, {"obj": None}) is None  # other columns



def test_temporary_files_of_killed_writers_are_removed(tmp_path: Path) -> None:
    run = RUNS["a single record"](tmp_path / "run")
    old, young = run / ".attempts.all.dead1.tmp", run / ".attempts.all.live1.tmp"
    for path in (old, young):
        path.write_bytes(b"half a cache")
    os.utime(old, (1.0, 1.0))
    load_run(run)
    assert not old.exists() and young.exists()
    assert frame_cache.cache_path(run / "attempts.jsonl", "all").is_file()
