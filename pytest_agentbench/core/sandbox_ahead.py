"""A sandbox opened ahead of its use, in a thread, while the attempt does other work.

Scoring's sandbox (core/score_phase.py) starts as soon as the pristine copy it mounts exists, when
the agent phase begins: its start overlaps the first snapshot and the agent's work instead of
following them (on this machine a container start is about a quarter of a second, a large part of
what the harness adds over a bare docker-py script), and it waits idle, nothing run in it, until
scoring takes it. Only where the sandbox sees the host's
workspace as it changes (a bind mount): what is written into the pre-agent copy after the start
(the recorded diff, the hidden tests) is then what the sandbox sees. An engine that takes archives
ships the workspace when the container is created, so there the sandbox opens when it is needed.

Nothing runs in the sandbox until `take` hands it over, so opening it early changes nothing it
will see; the bookkeeping (the attempt's open sandboxes, their facts, the start time) happens in
the caller's thread, at `take`. `discard` closes a sandbox that was never taken (an attempt ended
before scoring ran).

On the same engines the agent's sandbox, once the final diff is taken, is removed behind scoring
(`ClosingBehind`): a container removal is a tenth of a second or more, and nothing runs in that
sandbox any more. The attempt waits for the removal before it ends, and its error is the
attempt's, as when it ran in line.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING

from pytest_agentbench.core.attempt_config import sandbox_spec
from pytest_agentbench.sandbox.port import Sandbox, SandboxError

if TYPE_CHECKING:
    from pytest_agentbench.core.attempt import Attempt


def scoring_network(at: Attempt) -> bool:
    """Whether scoring's sandbox has a network (the task's policy says always)."""
    return at.spec.environment.network_policy == "always"


def opens_ahead(at: Attempt) -> bool:
    """Whether this attempt's engine shows its sandboxes the host's directories as they are."""
    return getattr(at.sandboxes, "transfer", None) == "bind"


class SandboxAhead:
    """The sandbox of `phase`, being opened in a thread from the moment this is made."""

    def __init__(self, at: Attempt, network: bool, phase: str) -> None:
        self.at, self.network, self.phase = at, network, phase
        self.spec = sandbox_spec(at.cfg, at.spec, at.workspace, network, phase, at.env_dir)
        self.sandbox: Sandbox | None = None
        self.error: BaseException | None = None
        self.seconds = 0.0
        self.taken = False
        self.thread = threading.Thread(target=self._open, name=f"agentbench-{phase}-sandbox",
                                       daemon=True)
        self.thread.start()

    def _open(self) -> None:
        started = time.monotonic()
        try:
            self.sandbox = self.at.sandboxes.open(self.spec)
        except BaseException as exc:  # handed to the caller by `take`
            self.error = exc
        self.seconds = time.monotonic() - started

    def take(self) -> Sandbox:
        """The open sandbox, recorded as the attempt's (or what its start raised)."""
        self.thread.join()
        self.taken = True
        timings = self.at.found.timings  # a start that raised took its time too (as open_sandbox)
        timings["sandbox_start"] = round(timings.get("sandbox_start", 0) + self.seconds, 3)
        if self.error is not None:
            raise self.error
        assert self.sandbox is not None
        at, sandbox = self.at, self.sandbox
        at.open_sandboxes.append(sandbox)
        at.environment.setdefault("sandboxes", []).append(
            {"phase": self.phase, "network": self.network, "facts": sandbox.facts()})
        return sandbox

    def discard(self) -> None:
        """Close the sandbox if it was never taken (safe to call after `take`)."""
        if self.taken:
            return
        self.thread.join()
        self.taken = True
        if self.sandbox is not None:
            with contextlib.suppress(SandboxError):
                self.sandbox.close()


class ClosingBehind:
    """A sandbox being closed in a thread while the attempt goes on (the agent's, on an engine
    that opens ahead: its removal overlaps scoring instead of preceding it). `wait` joins it and
    raises what the close raised; after the first `wait`, later ones return at once."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.error: BaseException | None = None
        self.waited = False
        self.thread = threading.Thread(target=self._close, args=(sandbox,),
                                       name="agentbench-close-sandbox", daemon=True)
        self.thread.start()

    def _close(self, sandbox: Sandbox) -> None:
        try:
            sandbox.close()
        except BaseException as exc:  # handed to the caller by `wait`
            self.error = exc

    def wait(self) -> None:
        self.thread.join()
        if self.waited:
            return
        self.waited = True
        if self.error is not None:
            raise self.error
