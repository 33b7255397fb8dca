"""A columnar cache of a loaded attempts frame, beside attempts.jsonl: `.attempts.<fields>.frame`.

Parsing 100,000 records takes seconds; reading them back from this file takes a tenth of that.
`load_run` writes the cache after a full parse and reuses it while `attempts.jsonl` is the
file it was made from: same device, inode, size and mtime_ns, and the same SHA-256 of the
file's first and last 64 KiB, under the same loader (a hash of its source), pandas, numpy
and `fields`. An appended record, a rewritten or replaced file, or a changed loader is a miss.

Run directories are shared (a reviewer opens someone else's run), so reading a cache can never
run code: no pickle, no `np.load`. The file is a magic line, the length and CRC-32 of a JSON
header, the header, and raw little-endian buffers (CRC-32 in the header) of an allow-listed
set of numeric dtypes; strings are UTF-8 JSON. Columns are encoded by kind:
- `array`: bool / int / float columns, as they are;
- `category`: codes plus the categories (strings);
- `strings`: a str column, or an object column holding only str and None: codes into a
  JSON array of the distinct values, -1 for the missing value;
- `json`: any other object column whose values are plain JSON (None, str, int, float, bool,
  list, dict with str keys; a tuple at the top): codes into a JSON array of the distinct
  values (by repr; equal values come back as one shared object), with the indices of those
  that are tuples.
A frame with anything else (another dtype, a non-range index, a nested tuple) is not cached.
Every read is checked (both CRCs, structure, bounds, row count, column set, each column's
dtype against the one written): anything odd and the cache is ignored, never trusted. The
cache must be owned by the reader or by the owner of attempts.jsonl (another user who can
write the directory cannot plant one) and is not followed through a symlink. Writes go to a
temporary file that replaces the old one; an unwritable directory is skipped silently.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import struct
import tempfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

FORMAT = 1
MAGIC = b"AGENTBENCH-FRAME\n"
_LEAD = struct.Struct("<QI")  # after the magic: the JSON header's length and CRC-32
EDGE = 64 * 1024  # bytes of attempts.jsonl hashed at each end
_ALIGN = 8
_DTYPES = frozenset({"|b1", "|i1", "|u1", "<i2", "<i4", "<i8", "<u8", "<f4", "<f8"})


class Unsupported(Exception):
    """The frame holds something this format does not round-trip exactly: not cached."""


def cache_path(attempts: Path, fields: str) -> Path:
    return attempts.with_name(f".attempts.{fields}.frame")


def file_key(st: os.stat_result, head: bytes, tail: bytes) -> dict[str, Any]:
    """What identifies one state of attempts.jsonl (see the module docstring)."""
    import hashlib

    return {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "head": hashlib.sha256(head).hexdigest(), "tail": hashlib.sha256(tail).hexdigest()}


def key_of_open_file(fh: BinaryIO) -> dict[str, Any]:
    """`file_key` of an open attempts.jsonl, reading only its two ends."""
    fd = fh.fileno()
    st = os.fstat(fd)
    head = os.pread(fd, EDGE, 0)
    tail = os.pread(fd, EDGE, max(0, st.st_size - EDGE))
    return file_key(st, head, tail)


def key_of_data(st: os.stat_result, data: bytes) -> dict[str, Any] | None:
    """`file_key` of attempts.jsonl read whole as `data`; None when the file changed size since
    (a writer appended after the read: that state must not be keyed)."""
    if st.st_size != len(data):
        return None
    return file_key(st, data[:EDGE], data[max(0, len(data) - EDGE):])


# --- write ------------------------------------------------------------------------------------

def write(attempts: Path, fields: str, key: dict[str, Any], frame: pd.DataFrame,
          info: dict[str, Any]) -> bool:
    """Cache `frame` (and `info`, small JSON facts) for `attempts`; False when skipped."""
    try:
        header, buffers = _encode(frame)
    except Unsupported:
        return False
    header.update(format=FORMAT, key=key, info=info)
    target = cache_path(attempts, fields)
    tmp = None
    try:
        _remove_stale_tmp(attempts.parent, fields)
        src = os.stat(attempts)
        fd, tmp = tempfile.mkstemp(prefix=f".attempts.{fields}.", suffix=".tmp",
                                   dir=attempts.parent)
        with os.fdopen(fd, "wb") as out:
            _write_file(out, header, buffers)
            # readable by whoever may read attempts.jsonl (it holds the same data)
            os.fchmod(out.fileno(), stat.S_IMODE(src.st_mode) & 0o444 | 0o200)
        os.replace(tmp, target)
        tmp = None
    except OSError:  # a read-only or full directory: the report works without a cache
        return False
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return True


STALE_TMP_SEC = 3600.0


def _remove_stale_tmp(directory: Path, fields: str) -> None:
    """Temporary files of writers killed mid-write (an hour old: none is still being written)."""
    import time

    now = time.time()
    for tmp in directory.glob(f".attempts.{fields}.*.tmp"):
        with contextlib.suppress(OSError):
            if tmp.is_file() and not tmp.is_symlink() and now - tmp.stat().st_mtime > STALE_TMP_SEC:
                tmp.unlink()


def _write_file(out: BinaryIO, header: dict[str, Any], buffers: list[bytes]) -> None:
    offset = crc = 0
    spans = []
    for buf in buffers:
        spans.append([offset, len(buf)])
        offset += _padded(len(buf))
        crc = zlib.crc32(b"\0" * (_padded(len(buf)) - len(buf)), zlib.crc32(buf, crc))
    header.update(buffers=spans, crc32=crc)
    text = json.dumps(header, separators=(",", ":")).encode()
    lead = MAGIC + _LEAD.pack(len(text), zlib.crc32(text))
    out.write(lead + text)
    out.write(b"\0" * (_padded(len(lead) + len(text)) - len(lead) - len(text)))
    for buf in buffers:
        out.write(buf)
        out.write(b"\0" * (_padded(len(buf)) - len(buf)))


def _padded(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _encode(frame: pd.DataFrame) -> tuple[dict[str, Any], list[bytes]]:
    index = frame.index
    if not (isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1):
        raise Unsupported("index")
    names = list(frame.columns)
    if not all(type(n) is str for n in names) or len(set(names)) != len(names):
        raise Unsupported("column names")
    buffers: list[bytes] = []

    def add(array: np.ndarray[Any, Any]) -> int:
        if array.dtype.str not in _DTYPES:
            raise Unsupported(f"dtype {array.dtype.str}")
        buffers.append(np.ascontiguousarray(array).tobytes())
        return len(buffers) - 1

    def add_json(value: Any) -> int:
        # ASCII with \u escapes: lone surrogates survive (they cannot be UTF-8)
        buffers.append(json.dumps(value, separators=(",", ":"), allow_nan=True).encode())
        return len(buffers) - 1

    columns = []
    for name in names:
        series = frame[name]
        dtype = series.dtype
        spec: dict[str, Any] = {"name": name, "dtype": repr(dtype)}
        if isinstance(dtype, pd.CategoricalDtype):
            cats = list(dtype.categories)
            if not all(type(c) is str for c in cats):
                raise Unsupported(f"{name}: categories")
            codes = series.cat.codes.to_numpy()
            spec.update(codec="category", codes=add(codes), codes_dtype=codes.dtype.str,
                        categories=add_json(cats), ordered=bool(dtype.ordered))
        elif isinstance(dtype, pd.StringDtype):
            spec.update(codec="strings", **_strings(series, add, add_json))
        elif isinstance(dtype, np.dtype) and dtype.kind in "biuf":
            spec.update(codec="array", values=add(series.to_numpy()))
        elif isinstance(dtype, np.dtype) and dtype.kind == "O":
            values = series.to_numpy()
            if set(map(type, values)) <= {str, type(None)}:
                spec.update(codec="strings", **_strings(series, add, add_json))
            else:
                spec.update(codec="json", **_plain_values(values, name, add, add_json))
        else:
            raise Unsupported(f"{name}: dtype {dtype!r}")
        columns.append(spec)
    return {"rows": len(frame), "columns": columns}, buffers


def _strings(series: pd.Series, add: Any, add_json: Any) -> dict[str, Any]:
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    values = np.asarray(uniques, dtype=object).tolist()
    if not set(map(type, values)) <= {str}:
        raise Unsupported(f"{series.name}: not str")
    return {"codes": add(_small(codes, len(values))), "uniques": add_json(values)}


_SCALARS = (str, int, float, bool, type(None))
_CODES = ("|i1", "<i2", "<i4")


def _small(codes: np.ndarray[Any, Any], distinct: int) -> np.ndarray[Any, Any]:
    """Codes (-1 for missing) in the smallest integer type: the read checks its width."""
    return codes.astype(_codes_dtype(distinct))


def _codes_dtype(distinct: int) -> str:
    return _CODES[0] if distinct < 2**7 else _CODES[1] if distinct < 2**15 else _CODES[2]


def _plain_values(values: np.ndarray[Any, Any], name: str, add: Any, add_json: Any
                  ) -> dict[str, Any]:
    """An object column of plain values as codes into its distinct values, by repr (equal
    values come back as one shared object: the reports only read them). Every row's type is
    checked; what a value holds, once per distinct repr."""
    if not set(map(type, values)) <= {*_SCALARS, list, tuple, dict}:
        raise Unsupported(f"{name}: not plain")
    codes, _ = pd.factorize(np.array(list(map(repr, values)), dtype=object))
    firsts = np.unique(codes, return_index=True)[1] if len(codes) else np.array([], dtype=int)
    uniques = [values[i] for i in firsts]
    for value in uniques:
        _check_plain(value, name, top=True)
    tuples = [i for i, v in enumerate(uniques) if type(v) is tuple]
    return {"codes": add(_small(codes, len(uniques))), "uniques": add_json([
        list(v) if type(v) is tuple else v for v in uniques]), "tuples": tuples}


def _check_plain(value: Any, name: str, top: bool = False) -> None:
    """`value` comes back from JSON exactly (same types), or `Unsupported`."""
    kind = type(value)
    if kind in _SCALARS:
        return
    if kind is list or (top and kind is tuple):
        for item in value:
            _check_plain(item, name)
    elif kind is dict:
        for k, item in value.items():
            if type(k) is not str:
                raise Unsupported(f"{name}: dict key {k!r}")
            _check_plain(item, name)
    else:
        raise Unsupported(f"{name}: {kind.__name__}")


# --- read -------------------------------------------------------------------------------------

class _Bad(Exception):
    """The cache file is not one this code wrote for this input: ignore it."""


def read(attempts: Path, fields: str, key: dict[str, Any], columns: Mapping[str, str | None],
         owner_uid: int | None = None) -> tuple[pd.DataFrame, dict[str, Any]] | None:
    """The cached frame and info for `attempts` in the state `key`, or None (a miss, or a cache
    that is stale, foreign, corrupt or malformed). Never raises for a bad cache file.

    `columns` holds exactly the frame's columns, each with its dtype's repr, or None for text
    and objects (an object or a pandas string dtype); `owner_uid` is the owner of
    attempts.jsonl (a cache owned by them or by the reader is accepted).
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(cache_path(attempts, fields), flags)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            found = _read_header(fh, owner_uid, limit=4 * int(key.get("size", 0)) + (16 << 20))
            if found is None or found[0].get("key") != key:
                return None  # foreign, or stale: attempts.jsonl, the loader or a library changed
            header, base = found
            data = bytearray(os.fstat(fh.fileno()).st_size - base)
            fh.seek(base)
            if fh.readinto(data) != len(data) or zlib.crc32(data) != header.get("crc32"):
                return None  # cut short or corrupt
        return _decode(header, data, columns)
    except (_Bad, OSError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            OverflowError, MemoryError, RecursionError, struct.error):
        return None


def _read_header(fh: BinaryIO, owner_uid: int | None, limit: int
                 ) -> tuple[dict[str, Any], int] | None:
    """The header of an open cache file and where its buffers start, or None when the file is
    not a regular file of the reader or of `owner_uid`, or is larger than `limit`."""
    st = os.fstat(fh.fileno())
    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
        return None
    geteuid = getattr(os, "geteuid", None)
    if geteuid is not None and st.st_uid not in {geteuid(), owner_uid}:
        return None
    lead = fh.read(len(MAGIC) + _LEAD.size)
    if len(lead) != len(MAGIC) + _LEAD.size or not lead.startswith(MAGIC):
        raise _Bad("magic")
    length, crc = _LEAD.unpack_from(lead, len(MAGIC))
    if length > st.st_size - len(lead):
        raise _Bad("header length")
    text = fh.read(length)
    if zlib.crc32(text) != crc:
        raise _Bad("header crc")
    header = json.loads(text)
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise _Bad("format")
    return header, _padded(len(lead) + length)


def _decode(header: dict[str, Any], data: bytearray, expected: Mapping[str, str | None]
            ) -> tuple[pd.DataFrame, dict[str, Any]]:
    rows, specs, spans, info = (header["rows"], header["columns"], header["buffers"],
                                header["info"])
    if type(rows) is not int or rows < 0 or not isinstance(specs, list) \
            or not isinstance(spans, list) or not isinstance(info, dict):
        raise _Bad("header")
    view = memoryview(data)

    def span(index: Any) -> memoryview:
        if type(index) is not int or not 0 <= index < len(spans):
            raise _Bad("buffer index")
        offset, size = spans[index]
        if type(offset) is not int or type(size) is not int or offset < 0 or size < 0 \
                or offset + size > len(data):
            raise _Bad("buffer bounds")
        return view[offset:offset + size]

    def array(index: Any, dtype: Any, count: int = rows) -> np.ndarray[Any, Any]:
        if dtype not in _DTYPES:
            raise _Bad("dtype")
        buf = span(index)
        if len(buf) != count * np.dtype(dtype).itemsize:
            raise _Bad("buffer size")
        return np.frombuffer(buf, dtype=dtype, count=count)

    def loads(index: Any) -> Any:
        return json.loads(bytes(span(index)))

    names = [spec.get("name") for spec in specs if isinstance(spec, dict)]
    if len(names) != len(specs) or set(names) != set(expected) or len(set(names)) != len(names):
        raise _Bad("columns")
    out: dict[str, Any] = {}
    for spec in specs:
        name, codec, dtype = spec["name"], spec["codec"], spec["dtype"]
        column: pd.Series
        if codec == "array":
            column = pd.Series(array(spec["values"], _numeric_dtype(dtype)), copy=False)
        elif codec == "category":
            cats = loads(spec["categories"])
            if not isinstance(cats, list) or not all(type(c) is str for c in cats):
                raise _Bad("categories")
            if spec["codes_dtype"] not in ("|i1", "<i2", "<i4", "<i8"):
                raise _Bad("codes dtype")
            codes = array(spec["codes"], spec["codes_dtype"])
            column = pd.Series(pd.Categorical.from_codes(
                codes, categories=cats, ordered=bool(spec["ordered"])))
        elif codec == "strings":
            uniques = loads(spec["uniques"])
            codes = array(spec["codes"], _codes_dtype(len(uniques)))
            column = _decode_strings(codes, uniques, dtype)
        elif codec == "json":
            uniques = loads(spec["uniques"])
            codes = array(spec["codes"], _codes_dtype(len(uniques)))
            column = _decode_json(codes, uniques, spec["tuples"])
        else:
            raise _Bad("codec")
        if repr(column.dtype) != dtype or len(column) != rows:
            raise _Bad(f"{name}: dtype")
        want = expected[name]
        if dtype != want if want is not None else codec not in ("strings", "json"):
            raise _Bad(f"{name}: not the loader's dtype")
        out[name] = column
    return pd.DataFrame(out), info


def _numeric_dtype(dtype_repr: str) -> str:
    """The buffer dtype of an `array` column from its pandas dtype repr ("dtype('int64')")."""
    for kind in _DTYPES:
        if repr(np.dtype(kind)) == dtype_repr:
            return kind
    raise _Bad("array dtype")


def _decode_strings(codes: np.ndarray[Any, Any], uniques: Any, dtype: str) -> pd.Series:
    if not isinstance(uniques, list) or not set(map(type, uniques)) <= {str}:
        raise _Bad("uniques")
    if len(codes) and (codes.min() < -1 or codes.max() >= len(uniques)):
        raise _Bad("codes")
    table = np.empty(len(uniques) + 1, dtype=object)
    table[:-1] = uniques
    if dtype == "dtype('O')":
        table[-1] = None
        return pd.Series(table[codes], dtype=object)
    string_dtype = pd.api.types.pandas_dtype(_string_dtype_name(dtype))
    table[-1] = string_dtype.na_value
    return pd.Series(pd.array(table[codes], dtype=string_dtype))


def _string_dtype_name(dtype_repr: str) -> str:
    """"str" or "string" for the pandas string dtypes (the repr is checked after decoding)."""
    for name in ("str", "string"):
        if repr(pd.api.types.pandas_dtype(name)) == dtype_repr:
            return name
    raise _Bad("string dtype")


def _decode_json(codes: np.ndarray[Any, Any], uniques: Any, tuples: Any) -> pd.Series:
    if not isinstance(uniques, list) or not isinstance(tuples, list):
        raise _Bad("json values")
    table = np.empty(len(uniques), dtype=object)
    for i, value in enumerate(uniques):
        table[i] = value
    for i in tuples:
        if type(i) is not int or not 0 <= i < len(uniques) or type(uniques[i]) is not list:
            raise _Bad("tuple")
        table[i] = tuple(uniques[i])
    if len(codes) and (codes.min() < 0 or codes.max() >= len(uniques)):
        raise _Bad("codes")
    return pd.Series(table[codes], dtype=object)
