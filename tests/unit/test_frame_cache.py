"""The frame cache beside attempts.jsonl (reporting/frame_cache.py): a warm load gives the very
frame a parse gives (dtypes, categories, derived columns, warnings); any change to the file is
a miss; a corrupt, truncated, foreign or malicious cache is ignored, never trusted, never run."""

from __future__ import annotations

import copy
import json
import os
import pickle
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pytest_agentbench.reporting.frame_cache as frame_cache
import pytest_agentbench.reporting.load as load
import pytest_agentbench.reporting.record_parse as record_parse
from pytest_agentbench.reporting.load import load_run
from tests.support.synthetic import make_record, synthetic_records, write_run

FIELDS = ("summary", "pairing", "all")


@pytest.fixture(autouse=True)
def cache_small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cache every run here, however small (the loader skips files under 1 MiB)."""
    monkeypatch.setattr(load, "CACHE_MIN_BYTES", 0)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times attempts.jsonl was parsed (a cache hit parses nothing)."""
    calls: list[int] = []
    real = record_parse.parse_jsonl

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(record_parse, "parse_jsonl", counted)
    return calls


# --- the run fixtures: every kind of record the tests and the plugin write -------------------

def _retried(task: str, engines: tuple[str, ...], passed: bool) -> dict[str, Any]:
    r = copy.deepcopy(make_record("run-e", task, "custom-dev", "v", 0, 1, passed,
                                  None if passed else "SANDBOX_ERROR", steps=3, duration=9.5))
    r["engine"] = "default"
    r["retried"] = [{"engine": e, "failure_reason": "SANDBOX_ERROR", "sub_reason": "ENGINE_LOST",
                     "summary": f"engine {e} lost", "duration_sec": 7.0 + i,
                     "artifacts_dir": f"tasks/{task}.try{i + 1}"} for i, e in enumerate(engines)]
    return r


def _invalid(task: str) -> dict[str, Any]:
    r = copy.deepcopy(make_record("run-i", task, "s", "v", 0, 1, False, "TASK_INVALID", 0, 0.0))
    r.update(task_commit="", artifact_paths={"task_dir": ""})
    r["usage"]["cost_usd"] = None
    r["result"]["summary"] = "task.yaml: repo.commit: field required\n\u00e9\u4e2d\u0000 nul"
    return r


def _quoted(i: int) -> dict[str, Any]:
    r = make_record("run-q", f"t-\u00e9-{i}", "s\"uite", "v", 0, 1, False, "TESTS_FAILED", 2,
                    1.25, summary_ix=i % 4)
    r["result"]["signature"] = [f"tests/test_\u4e2d.py::t[{i}\\n]", "x\ty"]
    return r


def _lines(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


RUNS: dict[str, Callable[[Path], Path]] = {
    "synthetic, 3 attempts a task (invalid, flaky, quarantined)": lambda d: write_run(
        d, synthetic_records(600, attempts=3, seed=5, run_id="syn"), run_id="syn"),
    "engines and infra retries": lambda d: write_run(d, [
        _retried("t1", (), True), _retried("t2", ("second",), True),
        _retried("t3", ("second", "third"), False), _retried("t4", ("x",), False)]),
    "records from before engines (no engine, no retried)": lambda d: write_run(d, [
        {k: v for k, v in make_record("r", f"t{i}", "s", "v", 0, 1, i % 2 == 0,
                                      None if i % 2 == 0 else "AGENT_GAVE_UP", 3, 2.0).items()
         if k not in ("engine", "retried")} for i in range(5)]),
    "invalid tasks only (no artifact paths, odd text)": lambda d: write_run(
        d, [_invalid(f"bad{i}") for i in range(4)]),
    "quotes, tabs and non-ASCII everywhere": lambda d: write_run(
        d, [_quoted(i) for i in range(8)]),
    "a single record": lambda d: write_run(
        d, [make_record("one", "t", "s", "v", 0, 1, True, None, 1, 1.0)]),
}


def _with_tail(d: Path, tail: str) -> Path:
    run = write_run(d, synthetic_records(40, attempts=2, seed=9, run_id="w"), run_id="w")
    with (run / "attempts.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(tail)
    return run


RUNS["a truncated last line"] = lambda d: _with_tail(d, '{"run_id": "w", "task_id": "t')
RUNS["a resumed run's duplicate records"] = lambda d: _with_tail(d, _lines(list(
    synthetic_records(6, attempts=2, seed=9, run_id="w", skill=-0.5))))


def _frames_equal(a: load.Run, b: load.Run) -> None:
    pd.testing.assert_frame_equal(a.attempts, b.attempts, check_exact=True)
    assert list(a.attempts.columns) == list(b.attempts.columns)
    assert a.warnings == b.warnings
    for column in ("retried", "retry_engines", "signature"):
        kinds_a = [type(v) for v in a.attempts[column]]
        assert kinds_a == [type(v) for v in b.attempts[column]], column


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
    _frames_equal(parsed, cold)
    _frames_equal(parsed, warm)
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
        fh.write(_lines([_record(5, passed=False)]))
    frame = load_run(run).attempts
    assert len(frame) == 6 and not frame["passed"].iloc[-1] and len(parses) == 2
    _frames_equal(load_run(run, cache=False), load_run(run))


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
            fh.write(_lines([_record(99, passed=False)]))
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


# --- bad caches: ignored, the parse's frame returned -------------------------------------------

@pytest.fixture
def cached_run(tmp_path: Path) -> tuple[Path, Path, load.Run]:
    run = RUNS["engines and infra retries"](tmp_path / "run")
    reference = load_run(run, fields="all", cache=False)
    load_run(run, fields="all")
    return run, frame_cache.cache_path(run / "attempts.jsonl", "all"), reference


def _check_ignored(run: Path, reference: load.Run, parses: list[int]) -> None:
    before = len(parses)
    _frames_equal(reference, load_run(run, fields="all"))
    assert len(parses) == before + 1, "a bad cache was used instead of parsing"


def test_truncated_caches_are_ignored(cached_run: tuple[Path, Path, load.Run],
                                      parses: list[int]) -> None:
    run, cache, reference = cached_run
    whole = cache.read_bytes()
    for size in sorted({0, 1, 10, 17, 25, 29, 100, len(whole) // 2, len(whole) - 8,
                        len(whole) - 1}):
        cache.write_bytes(whole[:size])
        _check_ignored(run, reference, parses)


def test_flipped_bytes_are_ignored(cached_run: tuple[Path, Path, load.Run],
                                   parses: list[int]) -> None:
    """Every byte flipped in turn (a sample of positions): header, padding or data."""
    run, cache, reference = cached_run
    whole = cache.read_bytes()
    rng = random.Random(14)
    positions = sorted(set(range(0, 64)) | {rng.randrange(len(whole)) for _ in range(60)})
    for pos in positions:
        bad = bytearray(whole)
        bad[pos] ^= 0x5A
        cache.write_bytes(bytes(bad))
        before = len(parses)
        warm = load_run(run, fields="all")
        _frames_equal(reference, warm)
        # padding bytes between the header and the buffers are the only ones no CRC covers
        if len(parses) == before:
            assert whole[pos] == 0, f"byte {pos} changed and the cache was still used"


def _rewrite_header(cache: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Edit the header and write it back with a valid CRC (a forged, well-formed cache)."""
    import struct
    import zlib

    data = cache.read_bytes()
    lead = len(frame_cache.MAGIC)
    length, _ = struct.unpack_from("<QI", data, lead)
    text = data[lead + 12:lead + 12 + length]
    header = json.loads(text)
    body = data[frame_cache._padded(lead + 12 + length):]
    change(header)
    new = json.dumps(header).encode()
    head = frame_cache.MAGIC + struct.pack("<QI", len(new), zlib.crc32(new)) + new
    cache.write_bytes(head + b"\0" * (frame_cache._padded(len(head)) - len(head)) + body)


def _column(header: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in header["columns"] if c["name"] == name)


FORGERIES: dict[str, Callable[[dict[str, Any]], None]] = {
    "more rows": lambda h: h.update(rows=h["rows"] + 1),
    "fewer rows": lambda h: h.update(rows=h["rows"] - 1),
    "negative rows": lambda h: h.update(rows=-1),
    "a column dropped": lambda h: h["columns"].pop(),
    "a column added": lambda h: h["columns"].append(dict(h["columns"][0], name="extra")),
    "a column renamed": lambda h: h["columns"][0].update(name="task_id_x"),
    "a column twice": lambda h: h["columns"].append(h["columns"][0]),
    "float read as int": lambda h: _column(h, "duration_sec").update(dtype="dtype('int64')"),
    "object dtype": lambda h: _column(h, "duration_sec").update(dtype="dtype('O')"),
    "a pickled dtype": lambda h: _column(h, "duration_sec").update(dtype="dtype('O')",
                                                                   codec="array"),
    "unknown codec": lambda h: _column(h, "task_id").update(codec="pickle"),
    "text read as int": lambda h: _column(h, "task_id").update(dtype="dtype('int64')"),
    "text as an int array": lambda h: _column(h, "task_id").update(dtype="dtype('int64')",
                                                                   codec="array"),
    "buffer out of range": lambda h: h["buffers"][0].__setitem__(0, 10**9),
    "buffer index out of range": lambda h: _column(h, "passed").update(values=10**6),
    "negative buffer": lambda h: h["buffers"][0].__setitem__(1, -8),
    "a tuple that is no list": lambda h: _column(h, "retried").update(tuples=[10**6]),
    "float category codes": lambda h: _column(h, "category").update(codes_dtype="<f8"),
    "another format": lambda h: h.update(format=99),
    "info of the wrong shape": lambda h: h.update(info={"truncated": "yes", "duplicates": -1}),
    "info that is no dict": lambda h: h.update(info=[]),
    "another key": lambda h: h["key"].update(size=1),
    "columns that are no list": lambda h: h.update(columns={}),
    "a column that is no dict": lambda h: h["columns"].__setitem__(0, "task_id"),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forged_headers_are_ignored(cached_run: tuple[Path, Path, load.Run], name: str,
                                    parses: list[int]) -> None:
    run, cache, reference = cached_run
    _rewrite_header(cache, FORGERIES[name])
    _check_ignored(run, reference, parses)


def test_out_of_range_codes_are_ignored(cached_run: tuple[Path, Path, load.Run],
                                        parses: list[int]) -> None:
    """Codes past the distinct values (a forged body with a valid CRC)."""
    run, cache, reference = cached_run

    def shrink(header: dict[str, Any]) -> None:
        spec = _column(header, "task_id")
        header["buffers"][spec["uniques"]][1] = 2  # "[]": no distinct value left
    _rewrite_header(cache, shrink)
    _check_ignored(run, reference, parses)


def test_a_forged_cache_owned_by_someone_else_is_refused(
        cached_run: tuple[Path, Path, load.Run], monkeypatch: pytest.MonkeyPatch) -> None:
    run, cache, _ = cached_run
    path = run / "attempts.jsonl"
    with path.open("rb") as fh:
        key = {**frame_cache.key_of_open_file(fh), **load._loader_key("all")}
    me = os.stat(cache).st_uid
    assert frame_cache.read(path, "all", key, load.FRAME_COLUMNS, owner_uid=me) is not None
    monkeypatch.setattr(os, "geteuid", lambda: me + 1)
    assert frame_cache.read(path, "all", key, load.FRAME_COLUMNS, owner_uid=me + 2) is None
    assert frame_cache.read(path, "all", key, load.FRAME_COLUMNS, owner_uid=me) is not None


def test_a_symlinked_cache_is_not_followed(cached_run: tuple[Path, Path, load.Run],
                                           parses: list[int]) -> None:
    run, cache, reference = cached_run
    elsewhere = cache.with_name("elsewhere")
    os.replace(cache, elsewhere)
    cache.symlink_to(elsewhere)
    _check_ignored(run, reference, parses)
    assert not cache.is_symlink()  # the parse wrote a cache of its own in its place


def test_a_directory_in_place_of_the_cache(cached_run: tuple[Path, Path, load.Run],
                                           parses: list[int]) -> None:
    run, cache, reference = cached_run
    cache.unlink()
    cache.mkdir()
    _check_ignored(run, reference, parses)
    _check_ignored(run, reference, parses)  # cannot be replaced: parsed each time


class _Bomb:
    """Unpickling this writes a marker file: proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.write_text, (self.marker, "pwned"))


def test_pickles_and_npz_in_place_of_the_cache_never_run(
        cached_run: tuple[Path, Path, load.Run], parses: list[int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    run, cache, reference = cached_run
    marker = run.parent / "marker"
    payloads = [pickle.dumps(_Bomb(marker), protocol=p) for p in range(2, 6)]
    np.save(run.parent / "bomb.npy", np.array([_Bomb(marker)], dtype=object),
            allow_pickle=True)
    payloads.append((run.parent / "bomb.npy").read_bytes())
    np.savez(run.parent / "bomb.npz", x=np.array([_Bomb(marker)], dtype=object))
    payloads.append((run.parent / "bomb.npz").read_bytes())
    payloads.append(frame_cache.MAGIC + payloads[0])

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a cache read reached pickle or np.load")

    for payload in payloads:
        cache.write_bytes(payload)
        with monkeypatch.context() as m:
            for name in ("loads", "load", "Unpickler"):
                m.setattr(pickle, name, forbidden)
            m.setattr(np, "load", forbidden)
            _check_ignored(run, reference, parses)
            _frames_equal(reference, load_run(run, fields="all"))  # the rewritten cache: a hit
    assert not marker.exists()


def test_no_pickle_path_in_the_cache_code() -> None:
    """What the reader could call to run code is not there at all."""
    source = Path(frame_cache.__file__).read_text(encoding="utf-8")
    for banned in ("pickle", "np.load", "numpy.load", "read_pickle", "allow_pickle", "eval(",
                   "exec(", "read_parquet", "read_feather"):
        assert banned not in source.split('"""', 2)[2], banned
    assert "|O" not in frame_cache._DTYPES and all("O" not in d for d in frame_cache._DTYPES)


# --- writing -----------------------------------------------------------------------------------

def test_an_unwritable_directory_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            parses: list[int]) -> None:
    run = RUNS["a single record"](tmp_path / "run")
    reference = load_run(run, cache=False)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(frame_cache.tempfile, "mkstemp", refuse)
    _frames_equal(reference, load_run(run))
    _frames_equal(reference, load_run(run))
    assert len(parses) == 3
    assert sorted(p.name for p in run.iterdir()) == ["attempts.jsonl", "run.json"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes into read-only directories")
def test_a_read_only_directory_is_skipped(tmp_path: Path) -> None:
    run = RUNS["a single record"](tmp_path / "run")
    reference = load_run(run, cache=False)
    run.chmod(0o555)
    try:
        _frames_equal(reference, load_run(run))
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
