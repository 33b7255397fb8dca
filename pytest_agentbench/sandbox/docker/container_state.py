"""What a Docker sandbox knows of its container's state: whether it may still run commands, and
the error that says why not (the container stopped: SandboxExited, with its exit status and
cause; the engine does not answer: SandboxError)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_agentbench.sandbox.docker.containers import DockerErrors, failure
from pytest_agentbench.sandbox.port import SandboxError, SandboxExited, SandboxSpec


class ContainerState:
    """A base of DockerSandbox: `_api`, `container_id`, `spec` and `closed` are its."""

    _api: Any
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
