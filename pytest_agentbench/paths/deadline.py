"""The deadline of the tool call in progress, for host-side file operations.

A listing or a search over what the agent left must not run unbounded; `host_deadline` sets a
monotonic deadline for the block (per thread and task, a ContextVar) that `Walk` and the search
look at.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

_deadline: ContextVar[float | None] = ContextVar("agentbench_host_deadline", default=None)


@contextlib.contextmanager
def host_deadline(seconds: float) -> Iterator[float]:
    """Bound the host-side file operations inside the block to `seconds` from now (nested blocks
    only shorten it). Listings cut at the deadline report it in `Listing.incomplete`."""
    at = time.monotonic() + seconds
    outer = _deadline.get()
    if outer is not None:
        at = min(at, outer)
    token = _deadline.set(at)
    try:
        yield at
    finally:
        _deadline.reset(token)


def current_deadline() -> float | None:
    """The monotonic deadline set by the innermost `host_deadline`, if any."""
    return _deadline.get()
