"""SIGTERM ends a run the way Ctrl-C does: a KeyboardInterrupt in the main thread, so xdist stops
the workers, fixtures and the session end remove containers and the reports are written.

SIGINT always does, even when the run inherited it ignored: a shell without job control starts
a background job (`pytest ... &` in a script, some CI steps) with SIGINT set to SIG_IGN, Python
then leaves it so, and a run that owns containers could not be stopped by Ctrl-C or `kill -INT`
(it ran to its end and exited 0). The xdist workers, started afterwards, get
Python's own SIGINT handling from the controller.

A SIGTERM while a record is being written (`uninterrupted`) takes effect once the line is
complete; one that arrives after the run's end began (`run_ending`) is ignored.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

_TERM: dict[str, Any] = {"fired": False, "pending": False, "depth": 0, "previous": None,
                         "sigint_previous": None}
_ON_SIGTERM: list[Callable[[], object]] = []  # e.g. pass the signal on to the xdist workers


def on_sigterm(callback: Callable[[], object]) -> None:
    """Call `callback` (once) when the SIGTERM installed here arrives, before unwinding."""
    _ON_SIGTERM.append(callback)


def sigterm_as_interrupt() -> None:
    """Let SIGTERM end the session the way Ctrl-C does (KeyboardInterrupt). Installed in the
    main thread over the default action only. A SIGTERM that arrives while one is being
    handled is ignored, so the cleanup runs to its end (SIGKILL still stops everything)."""
    if threading.current_thread() is not threading.main_thread():
        return
    sigint_as_interrupt()
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return
    _TERM.update(fired=False, pending=False, depth=0, previous=signal.SIG_DFL)
    signal.signal(signal.SIGTERM, _on_sigterm)


def sigint_as_interrupt() -> None:
    """SIGINT raises KeyboardInterrupt in this run's main thread even if it was inherited
    ignored (the module docstring says why); a handler someone installed is left alone."""
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.SIG_IGN):
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _TERM["sigint_previous"] = signal.SIG_IGN


def restore_sigterm() -> None:
    """Put the previous SIGTERM (and SIGINT) action back (an in-process pytester run must not
    leak ours)."""
    if threading.current_thread() is threading.main_thread():
        if _TERM["previous"] is not None and signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, _TERM["previous"])
        if (_TERM["sigint_previous"] is not None
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            signal.signal(signal.SIGINT, _TERM["sigint_previous"])
    _TERM.update(previous=None, sigint_previous=None)
    _ON_SIGTERM.clear()


def run_ending() -> None:
    """The run is ending anyway: a SIGTERM from now on must not cut its end short."""
    _TERM["fired"] = True


def _on_sigterm(signum: int, frame: object) -> None:
    if _TERM["fired"]:
        return
    while _ON_SIGTERM:
        with contextlib.suppress(Exception):
            _ON_SIGTERM.pop()()
    if _TERM["depth"]:
        _TERM["pending"] = True  # raised when the record being written is complete
        return
    _TERM["fired"] = True
    raise KeyboardInterrupt("SIGTERM")


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """A SIGTERM during the block (writing a record) takes effect at its end."""
    _TERM["depth"] += 1
    try:
        yield
    finally:
        _TERM["depth"] -= 1
    if not _TERM["depth"] and _TERM["pending"] and not _TERM["fired"]:
        _TERM.update(pending=False, fired=True)
        raise KeyboardInterrupt("SIGTERM")
