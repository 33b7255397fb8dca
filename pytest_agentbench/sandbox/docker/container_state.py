"""What a Docker sandbox knows of its container's state: whether it may still run commands, and
the error that says why not (the container stopped: SandboxExited, with its exit status and
cause; the engine does not answer: SandboxError); and the kill of every process of the command
user, which ends in one of those when it fails."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

import pytest_agentbench.sandbox.docker.exec_stream as exec_stream
import pytest_agentbench.sandbox.docker.policy as policy
from pytest_agentbench.sandbox.docker.containers import DockerErrors, failure
from pytest_agentbench.sandbox.port import SandboxError, SandboxExited, SandboxSpec


class ContainerState:
    """A base of DockerSandbox, whose attributes these are."""

    _api: Any
    _shell: str
    user: str
    container_id: str
    spec: SandboxSpec
    closed: bool
    _broken: SandboxError | None = None

    def _check_usable(self) -> None:
        if self.closed:
            raise SandboxError("sandbox is closed")
        if isinstance(self._broken, SandboxExited):
            raise SandboxExited(f"sandbox is unusable: {self._broken}",
                                exit_code=self._broken.exit_code,
                                oom_killed=self._broken.oom_killed, status=self._broken.status)
        if self._broken is not None:
            raise SandboxError(f"sandbox is unusable: {self._broken}")

    def _state(self) -> dict[str, Any] | None:
        try:
            return dict(self._api.inspect_container(self.container_id)["State"])
        except DockerErrors:
            return None

    def _exited(self, what: str, state: Mapping[str, Any]) -> SandboxExited:
        code, oom = state.get("ExitCode"), bool(state.get("OOMKilled"))
        cause = (f"its lifetime of {self.spec.lifetime_sec:g}s ran out" if code == 0 and not oom
                 else "it ran out of memory" if oom else "its init process ended")
        self._broken = SandboxExited(
            f"{what}: the sandbox container exited ({cause}; status {state.get('Status')}, "
            f"exit code {code}, OOMKilled={oom})",
            exit_code=code, oom_killed=oom, status=state.get("Status"))
        return self._broken

    def _failure(self, what: str, exc: BaseException) -> SandboxError:
        """SandboxExited if the container stopped; SandboxError if the engine does not answer."""
        state = self._state()
        if state is None:
            return failure(self._api, f"{what}: {exc} (the container is gone)")
        if not state.get("Running"):
            return self._exited(what, state)
        return SandboxError(f"{what}: {exc}")

    def _kill_user(self, why: str) -> None:
        """Kill every process of the command user from a fresh exec (sandbox.py `_reap`); if that
        fails three times, the container is killed and SandboxExited or SandboxError raised."""
        problem: object = "the kill command failed"
        for attempt in range(3):
            try:
                kill_id = self._api.exec_create(self.container_id,
                                                [self._shell, "-p", "-c", policy.KILL_SCRIPT],
                                                user=self.user)["Id"]
                exec_stream.output(self._api, kill_id)
                if exec_stream.exit_code(self._api, kill_id) == 0:
                    return
            except DockerErrors as exc:
                problem = exc
            state = self._state()
            if state is None:
                raise failure(self._api, f"cannot stop a command ({why}): {problem} (the "
                              "container is gone)")
            if not state.get("Running"):
                raise self._exited(f"stopping a command ({why})", state)
            time.sleep(0.1 * (attempt + 1))  # e.g. the pids limit: a process may exit meanwhile
        with contextlib.suppress(*DockerErrors):
            self._api.kill(self.container_id)
        self._broken = SandboxExited(
            f"a command ({why}) could not be stopped ({problem}); the harness killed the "
            "sandbox", exit_code=None, status="killed by the harness")
        raise self._broken
