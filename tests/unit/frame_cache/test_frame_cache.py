"""The frame cache beside attempts.jsonl (reporting/frame_cache.py): a warm load gives the very
frame a parse gives (dtypes, categories, derived columns, warnings); any change to the file is
a miss. Bad caches: test_frame_cache_hostile.py; writing one: test_frame_cache_writes.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pytest_agentbench.reporting.frame_cache as frame_cache
import pytest_agentbench.reporting.load as load
import pytest_agentbench.reporting.record_parse as record_parse
from pytest_agentbench.reporting.load import load_run
from tests.support.frame_cache_runs import FIELDS, RUNS, frames_equal, lines_of
from tests.support.synthetic import make_record, write_run


@pytest.mark.parametrize("fields", FIELDS)
@pytest.mark.parametrize("name", sorted(RUNS))
def test_warm_frame_is_the_parsed_frame(tmp_path: Path, name: str, fields: Any,
                                        parses: list[int]) -> None:
    run = RUNS[name](tmp_path / "run")
    parsed = load_run(run, fields=fields, cache=False)
    assert not frame_cache.cache_path(run / "attempts.jsonl", fields).exists()
    cold = load_run(run, fields=fields)
    assert frame_cache.cache_path(run / "attempts.jsonl", fields).is_file()
    assert len(parses) == 2
    warm = load_run(run, fields=fields)
    assert len(parses) == 2, "the warm load parsed attempts.jsonl"
    frames_equal(parsed, cold)
    frames_equal(parsed, warm)
    assert set(warm.attempts.columns) == set(load.FRAME_COLUMNS)
    assert warm.attempts["category"].dtype == pd.CategoricalDtype(load.CATEGORIES)


def test_each_profile_has_its_own_cache(tmp_path: Path, parses: list[int]) -> None:
    run = RUNS["engines and infra retries"](tmp_path / "run")
    for fields in FIELDS:
        load_run(run, fields=fields)
    assert len(parses) == 3
    summary = load_run(run, fields="summary").attempts
    assert (summary["task_commit"] == "").all()  # not parsed in the summary profile
    assert (load_run(run, fields="pairing").attempts["task_commit"] != "").all()
    assert len(parses) == 3


def test_small_files_are_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(load, "CACHE_MIN_BYTES", 1 << 20)
    run = RUNS["a single record"](tmp_path / "run")
    load_run(run, fields="summary")
    assert sorted(p.name for p in run.iterdir()) == ["attempts.jsonl", "run.json"]


# --- invalidation ------------------------------------------------------------------------------

def _record(i: int, passed: bool = True) -> dict[str, Any]:
    return make_record("r", f"t{i}", "s", "v", 0, 1, passed, None if passed else "TESTS_FAILED",
                       3, 2.0)


def test_an_appended_record_is_seen(tmp_path: Path, parses: list[int]) -> None:
    run = write_run(tmp_path / "run", [_record(i) for i in range(5)])
    assert len(load_run(run).attempts) == 5
    assert len(load_run(run).attempts) == 5 and len(parses) == 1
    with (run / "attempts.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(lines_of([_record(5, passed=False)]))
    frame = load_run(run).attempts
    assert len(frame) == 6 and not frame["passed"].iloc[-1] and len(parses) == 2
    frames_equal(load_run(run, cache=False), load_run(run))


def test_a_rewrite_of_the_same_size_and_mtime_is_seen(tmp_path: Path,
                                                      parses: list[int]) -> None:
    """Same inode, size and mtime_ns (restored): only the content differs, inside the hashed
    ends of the file."""
    path = write_run(tmp_path / "run", [_record(i, passed=i != 3) for i in range(5)]) \
        / "attempts.jsonl"
    assert load_run(path.parent).attempts["passed"].tolist() == [True, True, True, False, True]
    before = path.stat()
    text = path.read_text(encoding="utf-8").replace('"task_id":"t1"', '"task_id":"t9"')
    with path.open("r+", encoding="utf-8") as fh:  # in place: the inode stays
        fh.write(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == \
        (before.st_ino, before.st_size, before.st_mtime_ns)
    assert "t9" in load_run(path.parent).attempts["task_id"].tolist()
    assert len(parses) == 2


def test_a_replaced_file_is_seen(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", [_record(i) for i in range(5)])
    load_run(run)
    other = write_run(tmp_path / "other", [_record(i, passed=False) for i in range(5)])
    os.replace(other / "attempts.jsonl", run / "attempts.jsonl")
    assert not load_run(run).attempts["passed"].any()


def test_a_run_being_written(tmp_path: Path, parses: list[int]) -> None:
    """A partial last line is skipped (and the state cached); once the writer finishes it, the
    record is there and the warning gone."""
    run = write_run(tmp_path / "run", [_record(i) for i in range(3)])
    line = json.dumps(_record(3, passed=False)) + "\n"
    with (run / "attempts.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(line[:40])
    first = load_run(run)
    assert len(first.attempts) == 3 and "truncated last line" in first.warnings[0]
    assert load_run(run).warnings == first.warnings and len(parses) == 1
    with (run / "attempts.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(line[40:])
    done = load_run(run)
    assert len(done.attempts) == 4 and done.warnings == () and len(parses) == 2


def test_a_record_appended_while_parsing_is_not_hidden(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin appends while a report parses: the cache is keyed to what was read, so the
    next load sees the new record."""
    run = write_run(tmp_path / "run", [_record(i) for i in range(4)])
    real = record_parse.parse_jsonl

    def appending(*args: Any, **kwargs: Any) -> Any:
        with (run / "attempts.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(lines_of([_record(99, passed=False)]))
        monkeypatch.setattr(record_parse, "parse_jsonl", real)
        return real(*args, **kwargs)

    monkeypatch.setattr(record_parse, "parse_jsonl", appending)
    assert len(load_run(run).attempts) == 4
    assert len(load_run(run).attempts) == 5


def test_a_file_growing_during_the_read_is_not_cached(tmp_path: Path) -> None:
    data = b'{"a": 1}\n'
    path = tmp_path / "attempts.jsonl"
    path.write_bytes(data + data)
    assert frame_cache.key_of_data(os.stat(path), data) is None
    assert frame_cache.key_of_data(os.stat(path), data + data) is not None


def test_another_loader_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  parses: list[int]) -> None:
    run = write_run(tmp_path / "run", [_record(i) for i in range(3)])
    load_run(run)
    monkeypatch.setattr(load, "_loader_fingerprint", lambda: "another loader")
    load_run(run)
    assert len(parses) == 2


def test_loader_fingerprint_covers_the_loader_source() -> None:
    assert len(load._loader_fingerprint()) == 64
    here = Path(load.__file__).parent
    assert all((here / name).is_file() for name in load._LOADER_SOURCES)

