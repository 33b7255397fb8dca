"""A columnar cache of a loaded attempts frame, beside attempts.jsonl: `.attempts.<fields>.frame`.

Parsing 100,000 records takes seconds; reading them back from this file takes a tenth of that.
`load_run` writes the cache after a full parse and reuses it while `attempts.jsonl` is the
file it was made from: same device, inode, size and mtime_ns, and the same SHA-256 of the
file's first and last 64 KiB, under the same loader (a hash of its source), pandas, numpy
and `fields`. An appended record, a rewritten or replaced file, or a changed loader is a miss.

Run directories are shared (a reviewer opens someone else's run), so reading a cache can never
run code: no pickle, no `np.load`. The file is a magic line, the length and CRC-32 of a JSON
header, the header, and raw little-endian buffers (CRC-32 in the header) of an allow-listed
set of numeric dtypes; strings are UTF-8 JSON: the columns' codecs are frame_codec.py's (array,
category, strings, json). A frame with anything else (another dtype, a non-range index, a nested
tuple) is not cached.
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

import pandas as pd

from pytest_agentbench.reporting.frame_codec import _DTYPES as _DTYPES  # the buffers' dtypes
from pytest_agentbench.reporting.frame_codec import Bad as _Bad
from pytest_agentbench.reporting.frame_codec import Unsupported
from pytest_agentbench.reporting.frame_codec import decode as _decode
from pytest_agentbench.reporting.frame_codec import encode as _encode

FORMAT = 2  # 2: the summary profile parses the resource policy (a format-1 frame has it as NaN)
MAGIC = b"AGENTBENCH-FRAME\n"
_LEAD = struct.Struct("<QI")  # after the magic: the JSON header's length and CRC-32
EDGE = 64 * 1024  # bytes of attempts.jsonl hashed at each end
_ALIGN = 8


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


# --- read -------------------------------------------------------------------------------------

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
