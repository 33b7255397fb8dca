"""Failure signatures of the summary: failing attempts clustered by what went wrong.

An attempt's key is its failing test ids (`signature`, joined by " | ") when it recorded some,
else "<reason>: <normalized summary>" (numbers, hex ids and quoted values masked). Strings are
built once per distinct (reason, summary) and counted as integer codes (a pandas groupby on the
key strings cost about 0.5 s over 50,000 failures).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from pytest_agentbench.reporting.task_index import IntArray, ObjArray, TaskIndex

_HEX = re.compile(r"0x[0-9a-fA-F]+|\b[0-9a-f]{8,}\b")
_NUM = re.compile(r"\d+(\.\d+)?")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_SPACE = re.compile(r"\s+")


def normalize_summary(text: str, limit: int = 160) -> str:
    """Normalized failure text for clustering: numbers, hex ids and quoted values masked."""
    text = _HEX.sub("<hex>", text)
    text = _QUOTED.sub("<str>", text)
    text = _NUM.sub("<n>", text)
    return _SPACE.sub(" ", text).strip()[:limit]


def _reason_texts(frame: pd.DataFrame) -> ObjArray:
    reasons = frame["failure_reason"].to_numpy(dtype=object)
    return np.where(pd.isna(reasons), "FAILED", reasons).astype(object)


def signature_key_codes(frame: pd.DataFrame) -> tuple[IntArray, ObjArray]:
    """Per row, the code of its cluster key, and the distinct keys (code -> key text)."""
    sig = np.array([" | ".join(v) if isinstance(v, list) else "" for v in frame["signature"]],
                   dtype=object)
    s_codes, s_uniq = pd.factorize(frame["summary"].to_numpy(dtype=object))
    r_codes, r_uniq = pd.factorize(_reason_texts(frame))
    pair = r_codes.astype(np.int64) * max(1, len(s_uniq)) + s_codes
    pairs, inverse = np.unique(pair, return_inverse=True)
    width = max(1, len(s_uniq))
    texts = np.array([f"{r_uniq[p // width]}: {normalize_summary(str(s_uniq[p % width]))}"
                      for p in pairs.tolist()], dtype=object)
    keys = np.where(sig != "", sig, texts[inverse.reshape(-1)] if len(pairs) else sig)
    codes, uniq = pd.factorize(keys.astype(object))
    return codes.astype(np.int64), np.asarray(uniq, dtype=object)


def signature_keys(frame: pd.DataFrame) -> pd.Series:
    """Cluster key per attempt: failing test ids if recorded, else the normalized summary."""
    codes, uniq = signature_key_codes(frame)
    return pd.Series(uniq[codes] if len(codes) else [], index=frame.index, dtype=object)


def signatures(fails: pd.DataFrame, tasks: TaskIndex, task_codes: IntArray,
               top: int) -> list[dict[str, Any]]:
    """The `top` most common keys among failing scored attempts `fails` (rows of the frame
    `tasks` indexes; `task_codes` their task codes): attempts, tasks, the most common reason
    (ties by name) and up to three example tasks (first by id)."""
    if fails.empty:
        return []
    codes, keys = signature_key_codes(fails)
    count = np.bincount(codes, minlength=len(keys))
    width = max(1, len(tasks))
    pairs = np.unique(codes * width + task_codes)
    n_tasks = np.bincount(pairs // width, minlength=len(keys))
    key_rank = np.empty(len(keys), dtype=np.int64)
    key_rank[np.argsort(keys, kind="stable")] = np.arange(len(keys))
    chosen = np.lexsort((key_rank, -count))[:top]
    reasons = fails["failure_reason"].to_numpy(dtype=object)
    out = []
    for k in chosen.tolist():
        lo, hi = np.searchsorted(pairs, [k * width, (k + 1) * width])
        examples = [str(tasks.ids[p % width]) for p in pairs[lo:min(hi, lo + 3)].tolist()]
        out.append({"signature": str(keys[k]), "count": int(count[k]),
                    "tasks": int(n_tasks[k]), "top_reason": _top_reason(reasons[codes == k]),
                    "examples": examples})
    return out


def _top_reason(reasons: ObjArray) -> str | None:
    """The most common non-missing reason, ties broken by name; None if there is none."""
    known = reasons[pd.notna(reasons)]
    if len(known) == 0:
        return None
    values, counts = np.unique(known.astype(str), return_counts=True)
    return str(values[np.lexsort((values, -counts))[0]])
