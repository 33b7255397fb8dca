"""Run-level state: the run id and directory, made on the controller and shipped to workers.

The controller is the only writer of `run.json` and `attempts.jsonl`. Workers write their events
to `events/<session>-<worker>.jsonl`; the controller merges those into `events.jsonl` at the end.
Everything written here passes through the run's redactor. A line torn by a crash is set aside
(`.torn`) before anything is appended, and reported in `RunState.notes`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agentbench import __version__
from pytest_agentbench.core.rundir import append_jsonl, read_jsonl, repair_jsonl, write_json
from pytest_agentbench.run.hostenv import work_root
from pytest_agentbench.version import harness_version

if TYPE_CHECKING:
    from pytest_agentbench.text.redaction import Redactor

RedactRecord = Callable[[dict[str, Any]], dict[str, Any]]


class ResumeError(Exception):
    pass


class OutDirError(Exception):
    """--agentbench-out names a place where no run directory can be made."""


def check_out_dir(out: Path, where: str) -> None:
    """Refuse an output root that cannot hold run directories, creating nothing. `where` names
    the option and its value in the message (`--agentbench-out=DIR`)."""
    probe = out
    while not probe.exists() and not probe.is_symlink() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        what = "is a file" if probe.is_file() else "exists and is not a directory"
        if probe == out:
            raise OutDirError(f"{where}: {what}; expected a directory (or a path to create)")
        raise OutDirError(f"{where}: {probe} {what}, so no directory can be made under it")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise OutDirError(f"{where}: {probe} is not writable")


def _make_run_dir(run_dir: Path, where: str) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=False)
    except OSError as exc:
        failed = exc.filename or run_dir
        raise OutDirError(f"{where}: cannot create {failed} ({exc.strerror or exc})") from None


@dataclass
class RunState:
    run_id: str
    run_dir: str
    config_hash: str
    session_token: str
    done: list[str] = field(default_factory=list)  # "<task_id>#<attempt_index>" already recorded
    notes: list[str] = field(default_factory=list)  # torn lines set aside, lines skipped

    def to_wire(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_wire(cls, text: str) -> RunState:
        return cls(**json.loads(text))

    @property
    def path(self) -> Path:
        return Path(self.run_dir)


def new_run_id(suites: list[str], variant: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%SZ")
    safe = "+".join(suites) or "tasks"
    return f"{stamp}__{safe}__{variant}__{secrets.token_hex(3)}"


def start_run(
    out: Path,
    suites: list[str],
    variant: str,
    config: dict[str, Any],
    config_hash: str,
    resume: Path | None,
    redact_obj: Callable[[Any], Any] = lambda obj: obj,
    out_label: str = "--agentbench-out",
) -> RunState:
    token = secrets.token_hex(4)
    if resume is None:
        run_id = new_run_id(suites, variant.replace("/", "_"))
        run_dir = out / run_id
        _make_run_dir(run_dir, f"{out_label}={out}")
        write_json(
            run_dir / "run.json",
            {
                "run_id": run_id,
                "suites": suites,
                "variant": variant,
                "config": redact_obj(config),
                "config_hash": config_hash,
                "harness_version": harness_version(),
                "package_version": __version__,
                "started_at": datetime.now(UTC).isoformat(),
                "sessions": [token],
            },
        )
        return RunState(run_id, str(run_dir), config_hash, token)
    meta_path = resume / "run.json"
    if not meta_path.is_file():
        raise ResumeError(f"--agentbench-resume {resume}: no run.json there (not a run directory)")
    meta = json.loads(meta_path.read_text("utf-8"))
    if meta.get("config_hash") != config_hash:
        old, new = meta.get("config", {}), redact_obj(config)
        diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        raise ResumeError(
            f"--agentbench-resume {resume}: the configuration differs from the recorded run "
            f"({', '.join(diff) or 'config hash'}); start a new run or use the same options"
        )
    # a controller killed mid-write left a fragment: set it aside before anything is appended
    notes = [n for f in ("attempts.jsonl", "events.jsonl") if (n := repair_jsonl(resume / f))]
    done = sorted(
        {
            f"{r.get('task_id')}#{r.get('attempt_index')}"
            for r in read_jsonl(resume / "attempts.jsonl", notes)
            if r.get("variant_config_hash") == config.get("variant_config_hash")
        }
    )
    meta.setdefault("sessions", []).append(token)
    write_json(meta_path, meta)
    return RunState(meta["run_id"], str(resume), config_hash, token, done, notes)


def record_attempt(
    state: RunState, record: dict[str, Any], redact: RedactRecord | None = None
) -> None:
    append_jsonl(state.path / "attempts.jsonl", redact(record) if redact else record)


def merge_events(state: RunState, redact: RedactRecord | None = None) -> int:
    """Append every worker's event file to events.jsonl (in time order) and remove the parts.

    Each event passes through `redact` once more (the workers redacted with the same run-level
    secrets; this catches an event file written by anything else). Torn or malformed lines of
    a part are skipped and noted in `state.notes`."""
    parts_dir = state.path / "events"
    if not parts_dir.is_dir():
        return 0
    parts = sorted(parts_dir.glob("*.jsonl"))
    events = [e for part in parts for e in read_jsonl(part, state.notes)]
    events.sort(key=lambda e: (str(e.get("ts", "")), str(e.get("attempt_id", "")),
                               e.get("seq", 0) if isinstance(e.get("seq"), int) else 0))
    target = state.path / "events.jsonl"
    note = repair_jsonl(target)
    if note:
        state.notes.append(note)
    with target.open("a", encoding="utf-8") as handle:
        for event in events:
            event = redact(event) if redact else event
            handle.write(json.dumps(event, sort_keys=True, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    for part in parts:
        part.unlink()
    with contextlib.suppress(OSError):  # a part written after the merge stays for the next one
        parts_dir.rmdir()
    return len(events)


# -- the run's end ----------------------------------------------------------------------------
SWEEP_TIMEOUT_SEC = 20  # per Docker API call at the end: an engine that stopped answering


def end_run(
    state: RunState, redactor: Redactor, docker: bool, first: Callable[[], None] | None = None
) -> list[str]:
    """The controller's end of a run, as independent steps: one that fails (the Docker engine
    gone, a report bug) costs none of the others. Returns one line per failed step, also kept in
    `report_error.txt`."""
    from pytest_agentbench import reporting

    _TERM["fired"] = True  # the run is ending anyway: a SIGTERM now must not cut that short
    gc_hint = "; containers of this run may remain: `agentbench gc` once the engine answers"
    steps: list[tuple[str, Callable[[], Any] | None, str]] = [
        ("keep the records the interrupted workers sent", first, ""),
        ("merge events", lambda: merge_events(state, redactor.redact_record), ""),
        ("remove work directories", lambda: _remove_tree(work_root(state.run_id)), ""),
        ("sweep containers", (lambda: sweep_run(state.run_id)) if docker else None, gc_hint),
        ("write report_summary.md", lambda: reporting.write_summary(state.path, redactor=redactor),
         ""),
        ("write report.html", lambda: reporting.write_html(state.path, redactor=redactor), ""),
    ]
    errors = []
    for what, step, hint in steps:
        try:
            if step is not None:
                step()
        except Exception as exc:  # noqa: BLE001 - one failed step must not cost the others
            text = " ".join(str(exc).split())[:300]
            errors.append(redactor.redact(f"{what}: {type(exc).__name__}: {text}{hint}"))
    if errors:
        with contextlib.suppress(OSError):
            (state.path / "report_error.txt").write_text("".join(f"{e}\n" for e in errors), "utf-8")
    return errors


def sweep_run(run_id: str) -> int:
    """Remove every container of the run, by label, waiting at most SWEEP_TIMEOUT_SEC per call."""
    import docker

    from pytest_agentbench.sandbox.docker import DockerSandboxFactory

    client = docker.from_env(timeout=SWEEP_TIMEOUT_SEC)
    try:
        return DockerSandboxFactory(client).sweep({"agentbench.run_id": run_id})
    finally:
        client.close()


def _remove_tree(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)


# -- SIGTERM ----------------------------------------------------------------------------------
_TERM: dict[str, Any] = {"fired": False, "pending": False, "depth": 0, "previous": None}
_ON_SIGTERM: list[Callable[[], object]] = []  # e.g. pass the signal on to the xdist workers


def on_sigterm(callback: Callable[[], object]) -> None:
    """Call `callback` (once) when the SIGTERM installed here arrives, before unwinding."""
    _ON_SIGTERM.append(callback)


def sigterm_as_interrupt() -> None:
    """Let SIGTERM end the session the way Ctrl-C does (KeyboardInterrupt): xdist stops the
    workers, fixtures and the session end remove containers, the reports are written. Installed
    in the main thread over the default action only. A SIGTERM that arrives while one is being
    handled is ignored, so the cleanup runs to its end (SIGKILL still stops everything)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return
    _TERM.update(fired=False, pending=False, depth=0, previous=signal.SIG_DFL)
    signal.signal(signal.SIGTERM, _on_sigterm)


def restore_sigterm() -> None:
    """Put the previous SIGTERM action back (an in-process pytester run must not leak ours)."""
    if (_TERM["previous"] is not None and signal.getsignal(signal.SIGTERM) is _on_sigterm
            and threading.current_thread() is threading.main_thread()):
        signal.signal(signal.SIGTERM, _TERM["previous"])
    _TERM["previous"] = None
    _ON_SIGTERM.clear()


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
