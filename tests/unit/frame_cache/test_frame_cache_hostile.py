"""A corrupt, truncated, foreign or malicious frame cache (reporting/frame_cache.py) is ignored,
never trusted, never run: the load parses attempts.jsonl and gives the parse's frame."""

from __future__ import annotations

import json
import os
import pickle
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pytest_agentbench.reporting.frame_cache as frame_cache
import pytest_agentbench.reporting.load as load
from pytest_agentbench.reporting.load import load_run
from tests.support.frame_cache_runs import RUNS, frames_equal


@pytest.fixture
def cached_run(tmp_path: Path) -> tuple[Path, Path, load.Run]:
    run = RUNS["engines and infra retries"](tmp_path / "run")
    reference = load_run(run, fields="all", cache=False)
    load_run(run, fields="all")
    return run, frame_cache.cache_path(run / "attempts.jsonl", "all"), reference


def _check_ignored(run: Path, reference: load.Run, parses: list[int]) -> None:
    before = len(parses)
    frames_equal(reference, load_run(run, fields="all"))
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
        frames_equal(reference, warm)
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
            frames_equal(reference, load_run(run, fields="all"))  # the rewritten cache: a hit
    assert not marker.exists()


def test_no_pickle_path_in_the_cache_code() -> None:
    """What the reader could call to run code is not there at all."""
    source = Path(frame_cache.__file__).read_text(encoding="utf-8")
    for banned in ("pickle", "np.load", "numpy.load", "read_pickle", "allow_pickle", "eval(",
                   "exec(", "read_parquet", "read_feather"):
        assert banned not in source.split('"""', 2)[2], banned
    assert "|O" not in frame_cache._DTYPES and all("O" not in d for d in frame_cache._DTYPES)

