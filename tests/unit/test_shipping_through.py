"""The one error translation of shipping host files through a loader container
(sandbox/docker/kept_copies.shipping_through, used by kept_copies and shipped_mounts)."""

from __future__ import annotations

from typing import Any

import pytest
from docker.errors import APIError, DockerException

from pytest_agentbench.sandbox.archives import ArchiveRefused
from pytest_agentbench.sandbox.docker.kept_copies import shipping_through
from pytest_agentbench.sandbox.port import EngineLost, SandboxError


class FakeApi:
    def __init__(self, answers: bool = True, remove_fails: bool = False) -> None:
        self.answers, self.remove_fails = answers, remove_fails
        self.removed: list[str] = []

    def ping(self) -> bool:
        if not self.answers:
            raise APIError("no engine")
        return True

    def remove_container(self, container_id: str, **_: Any) -> None:
        self.removed.append(container_id)
        if self.remove_fails:
            raise APIError("busy")


def ship(api: FakeApi, exc: Exception | None) -> None:
    with shipping_through(api, "loader1", "refused to ship X", "cannot ship X"):
        if exc is not None:
            raise exc


@pytest.mark.parametrize(("exc", "answers", "kind", "line"), [
    (ArchiveRefused("over 5 bytes"), True, SandboxError, "refused to ship X: over 5 bytes"),
    (PermissionError("denied"), True, SandboxError, "cannot ship X: denied"),
    (DockerException("boom"), True, SandboxError, "cannot ship X: boom"),
    (DockerException("boom"), False, EngineLost,
     "cannot ship X: boom (the engine does not answer)"),
    # an APIError is an OSError (requests' errors are IOErrors): still the engine's
    (APIError("gone"), False, EngineLost, "cannot ship X: gone (the engine does not answer)"),
    (ConnectionResetError("reset"), False, EngineLost,
     "cannot ship X: reset (the engine does not answer)"),
])
def test_each_error_becomes_one_line_and_the_loader_goes(
        exc: Exception, answers: bool, kind: type[SandboxError], line: str) -> None:
    api = FakeApi(answers=answers)
    with pytest.raises(SandboxError) as caught:
        ship(api, exc)
    assert type(caught.value) is kind
    assert str(caught.value) == line
    assert caught.value.__cause__ is exc
    assert api.removed == ["loader1"]


def test_success_removes_the_loader_and_a_failed_removal_is_ignored() -> None:
    api = FakeApi(remove_fails=True)
    ship(api, None)
    assert api.removed == ["loader1"]


def test_other_errors_pass_through() -> None:
    api = FakeApi()
    with pytest.raises(ValueError, match="not ours"):
        ship(api, ValueError("not ours"))
    assert api.removed == ["loader1"]
