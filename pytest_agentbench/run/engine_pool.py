"""Which Docker engine runs an attempt: the run's engines, their slots, and leases on them.

The controller resolves `--agentbench-engine` once (sandbox/docker/engines.py: reach each engine,
put the runner image on it, decide bind or archive transfer) into `EnginePlan`s that travel to the
xdist workers as plain data. Each attempt then leases a slot of one engine for its whole life (all
its phases run there): slots are lock files under the run's work root, shared by every worker on
this machine, so an engine with `slots=N` never runs more than N attempts of the run at once,
whatever `-n` is. A worker tries the engines in an order rotated by its number (workers spread over
the engines), takes the first free slot, and waits when every slot is taken. An engine without a
slot count takes any number of attempts (`default` alone behaves as before).

A lease can exclude engines (the ones an attempt already lost): the retry of an attempt whose
engine went away (`--agentbench-retry-infra`) runs elsewhere.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_agentbench.sandbox.port import EngineLost, SandboxError, SandboxFactory

WAIT_POLL_SEC = 0.25
DOWN_SEC = 30.0  # how long a lost engine is tried last


@dataclass(frozen=True)
class EnginePlan:
    """One engine as the run uses it: its name in records, how to reach it, its slot count
    (None: unbounded) and how workspaces reach its containers (bind | archive)."""

    name: str
    endpoint: str
    slots: int | None
    transfer: str
    allow_plaintext: bool = False

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> EnginePlan:
        return cls(**data)

    def spec_text(self) -> str:
        """The engine as `--agentbench-engine` spells it (for sandbox/engines.parse_engine)."""
        return self.endpoint + (",tls=off" if self.allow_plaintext else "")


@dataclass
class Lease:
    """A slot of one engine, held while an attempt runs there."""

    engine: str
    factory: SandboxFactory


class EnginePool:
    """The run's engines for one process: a factory per engine (made on first use) and slot
    leases. `prefer` rotates the order engines are tried in (the worker's number)."""

    def __init__(self, plans: list[EnginePlan], slot_dir: Path, prefer: int = 0,
                 own_labels: dict[str, str] | None = None,
                 make_factory: Callable[[EnginePlan], Any] | None = None) -> None:
        """`own_labels` find this process's sandboxes (run id and worker): what is swept from
        an engine that comes back after it was lost. `make_factory`: a plan's sandbox factory
        (default: a DockerSandboxFactory that connects on first use)."""
        if not plans:
            raise ValueError("an engine pool needs at least one engine")
        self.plans = plans
        self.slot_dir = slot_dir
        self.prefer = prefer % len(plans)
        self.own_labels = own_labels
        self._make_factory = make_factory or _make_factory
        self._factories: dict[str, Any] = {}
        self._down: dict[str, float] = {}  # engine -> when this process last lost it
        self._lock = threading.Lock()

    def mark_lost(self, name: str) -> None:
        """An attempt lost the engine: later leases try the others first for DOWN_SEC."""
        with self._lock:
            self._down[name] = time.monotonic()

    def mark_up(self, name: str) -> None:
        """An attempt ran on the engine to its end: it answers again. What this process left
        there when it was lost is swept now (no attempt of this process runs there)."""
        with self._lock:
            was_down = self._down.pop(name, None) is not None
        if was_down and self.own_labels:
            with contextlib.suppress(SandboxError):
                self.factory(name).sweep(self.own_labels)

    def _is_down(self, name: str) -> bool:
        with self._lock:
            since = self._down.get(name)
        return since is not None and time.monotonic() - since < DOWN_SEC

    @property
    def names(self) -> list[str]:
        return [plan.name for plan in self.plans]

    def factory(self, name: str) -> Any:
        """The engine's DockerSandboxFactory (connected on first use: EngineLost if it does not
        answer)."""
        with self._lock:
            made = self._factories.get(name)
            if made is None:
                plan = next(p for p in self.plans if p.name == name)
                made = self._factories[name] = self._make_factory(plan)
            return made

    def made(self) -> list[Any]:
        with self._lock:
            return list(self._factories.values())

    @contextlib.contextmanager
    def lease(self, exclude: frozenset[str] = frozenset()) -> Iterator[Lease]:
        """A free slot of the first engine (in this worker's order) not in `exclude`; waits
        while every slot is taken. ValueError when every engine is excluded."""
        order = self.plans[self.prefer:] + self.plans[:self.prefer]
        usable = [plan for plan in order if plan.name not in exclude]
        if not usable:
            raise ValueError(f"no engine left to run on (lost: {', '.join(sorted(exclude))})")
        answering = [plan for plan in usable if not self._is_down(plan.name)]
        usable = answering or usable  # all lost lately: try them anyway (they may be back)
        while True:
            for plan in usable:
                held = self._take_slot(plan)
                if held is None:
                    continue
                try:
                    yield Lease(plan.name, self.factory(plan.name))
                finally:
                    if held >= 0:
                        os.close(held)  # closing the descriptor releases the flock
                return
            time.sleep(WAIT_POLL_SEC)

    def _take_slot(self, plan: EnginePlan) -> int | None:
        """A locked slot file's descriptor (-1 for an unbounded engine), or None when all of the
        engine's slots are taken."""
        if plan.slots is None:
            return -1
        self.slot_dir.mkdir(parents=True, exist_ok=True)
        key = hashlib.sha256(plan.name.encode()).hexdigest()[:16]
        for slot in range(plan.slots):
            fd = os.open(self.slot_dir / f"{key}.{slot}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return fd
        return None

    def sweep(self, labels: dict[str, str]) -> list[str]:
        """Remove what carries `labels` on every engine this process used; one line per engine
        that could not be swept."""
        problems = []
        for plan in self.plans:
            if plan.name not in self._factories:
                continue
            try:
                self._factories[plan.name].sweep(labels)
            except SandboxError as exc:
                problems.append(f"engine {plan.name}: {exc}")
        return problems

    def close_all(self) -> None:
        """Close what is still open on every engine, then the engines' clients (an ssh
        bridge's processes with them)."""
        for factory in self.made():
            with contextlib.suppress(SandboxError):
                factory.close_all()
            client = getattr(factory, "_client", None)
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()


def _make_factory(plan: EnginePlan) -> Any:
    """The engine's factory; it connects on first use (inside an attempt, so an engine that is
    gone costs that attempt an ENGINE_LOST record, which a retry can take elsewhere)."""
    from pytest_agentbench.sandbox.docker.engines import EngineUnreachable, connect, parse_engine
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    def reach() -> Any:
        try:
            # a minute, as docker.from_env: also the read timeout of every later call (a
            # container's removal, an archive) on that client
            return connect(parse_engine(plan.spec_text()), timeout=60)
        except EngineUnreachable as exc:
            raise EngineLost(str(exc)) from exc

    return DockerSandboxFactory(transfer=plan.transfer, engine=plan.name, connect=reach)
