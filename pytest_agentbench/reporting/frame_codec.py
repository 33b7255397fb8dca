"""The columns of a cached attempts frame (frame_cache.py) as raw buffers and back: what the cache
file holds after its header. Columns are encoded by kind:
- `array`: bool / int / float columns, as they are;
- `category`: codes plus the categories (strings);
- `strings`: a str column, or an object column holding only str and None: codes into a
  JSON array of the distinct values, -1 for the missing value;
- `json`: any other object column whose values are plain JSON (None, str, int, float, bool,
  list, dict with str keys; a tuple at the top): codes into a JSON array of the distinct
  values (by repr; equal values come back as one shared object), with the indices of those
  that are tuples.
A frame with anything else (another dtype, a non-range index, a nested tuple) is `Unsupported`.
Decoding checks structure, bounds, row count, column set and each column's dtype against the
one expected, and raises `Bad` at anything odd; it never runs code (no pickle, no `np.load`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

_DTYPES = frozenset({"|b1", "|i1", "|u1", "<i2", "<i4", "<i8", "<u8", "<f4", "<f8"})


class Unsupported(Exception):
    """The frame holds something this format does not round-trip exactly: not cached."""


class Bad(Exception):
    """The cache file is not one this code wrote for this input: ignore it."""


def encode(frame: pd.DataFrame) -> tuple[dict[str, Any], list[bytes]]:
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


def decode(header: dict[str, Any], data: bytearray, expected: Mapping[str, str | None]
            ) -> tuple[pd.DataFrame, dict[str, Any]]:
    rows, specs, spans, info = (header["rows"], header["columns"], header["buffers"],
                                header["info"])
    if type(rows) is not int or rows < 0 or not isinstance(specs, list) \
            or not isinstance(spans, list) or not isinstance(info, dict):
        raise Bad("header")
    view = memoryview(data)

    def span(index: Any) -> memoryview:
        if type(index) is not int or not 0 <= index < len(spans):
            raise Bad("buffer index")
        offset, size = spans[index]
        if type(offset) is not int or type(size) is not int or offset < 0 or size < 0 \
                or offset + size > len(data):
            raise Bad("buffer bounds")
        return view[offset:offset + size]

    def array(index: Any, dtype: Any, count: int = rows) -> np.ndarray[Any, Any]:
        if dtype not in _DTYPES:
            raise Bad("dtype")
        buf = span(index)
        if len(buf) != count * np.dtype(dtype).itemsize:
            raise Bad("buffer size")
        return np.frombuffer(buf, dtype=dtype, count=count)

    def loads(index: Any) -> Any:
        return json.loads(bytes(span(index)))

    names = [spec.get("name") for spec in specs if isinstance(spec, dict)]
    if len(names) != len(specs) or set(names) != set(expected) or len(set(names)) != len(names):
        raise Bad("columns")
    out: dict[str, Any] = {}
    for spec in specs:
        name, codec, dtype = spec["name"], spec["codec"], spec["dtype"]
        column: pd.Series
        if codec == "array":
            column = pd.Series(array(spec["values"], _numeric_dtype(dtype)), copy=False)
        elif codec == "category":
            cats = loads(spec["categories"])
            if not isinstance(cats, list) or not all(type(c) is str for c in cats):
                raise Bad("categories")
            if spec["codes_dtype"] not in ("|i1", "<i2", "<i4", "<i8"):
                raise Bad("codes dtype")
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
            raise Bad("codec")
        if repr(column.dtype) != dtype or len(column) != rows:
            raise Bad(f"{name}: dtype")
        want = expected[name]
        if dtype != want if want is not None else codec not in ("strings", "json"):
            raise Bad(f"{name}: not the loader's dtype")
        out[name] = column
    return pd.DataFrame(out), info


def _numeric_dtype(dtype_repr: str) -> str:
    """The buffer dtype of an `array` column from its pandas dtype repr ("dtype('int64')")."""
    for kind in _DTYPES:
        if repr(np.dtype(kind)) == dtype_repr:
            return kind
    raise Bad("array dtype")


def _decode_strings(codes: np.ndarray[Any, Any], uniques: Any, dtype: str) -> pd.Series:
    if not isinstance(uniques, list) or not set(map(type, uniques)) <= {str}:
        raise Bad("uniques")
    if len(codes) and (codes.min() < -1 or codes.max() >= len(uniques)):
        raise Bad("codes")
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
    raise Bad("string dtype")


def _decode_json(codes: np.ndarray[Any, Any], uniques: Any, tuples: Any) -> pd.Series:
    if not isinstance(uniques, list) or not isinstance(tuples, list):
        raise Bad("json values")
    table = np.empty(len(uniques), dtype=object)
    for i, value in enumerate(uniques):
        table[i] = value
    for i in tuples:
        if type(i) is not int or not 0 <= i < len(uniques) or type(uniques[i]) is not list:
            raise Bad("tuple")
        table[i] = tuple(uniques[i])
    if len(codes) and (codes.min() < 0 or codes.max() >= len(uniques)):
        raise Bad("codes")
    return pd.Series(table[codes], dtype=object)
