"""The Docker sandbox factory a test session shares, and the labels that find what tests left.

`docker_sandboxes` is registered once, in tests/conftest.py, so the contract suite, the diff
tests and the sandbox attack tests share one factory per session (per xdist worker). Without a
Docker daemon it skips with the reason, except under CI=true, where the Docker tests must really
run and a missing daemon fails. At the end of the session no sandbox labelled with this
session's id may be left.

`open_labelled` opens sandboxes for one test, each labelled with the session and the test, and
checks after the test that closing them left nothing behind. `small_spec` is the small sandbox
those tests open on a fresh workspace.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.sandbox.port import Sandbox, SandboxError, SandboxFactory, SandboxSpec

SESSION_LABEL = "agentbench.test_session"
TEST_LABEL = "agentbench.test"
SESSION_ID = uuid.uuid4().hex[:12]

MakeSandbox = Callable[..., Any]


def small_spec(tmp_path: Path, **overrides: Any) -> SandboxSpec:
    """A one-CPU runner-image sandbox on a fresh `tmp_path/workspace` (its env dir beside it)."""
    from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE

    workspace = tmp_path / "workspace"
    workspace.mkdir()
    fields: dict[str, Any] = {"cpu_limit": 1.0, "mem_limit_mb": 512, "pids_limit": 256,
                              "lifetime_sec": 600, **overrides}
    return SandboxSpec(image=DEFAULT_IMAGE, workspace=workspace, env_dir=tmp_path / "env",
                       **fields)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def docker_sandboxes() -> Iterator[Any]:
    """A DockerSandboxFactory with the runner image present; skips (fails in CI) without Docker."""
    try:
        from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory
        from pytest_agentbench.sandbox.docker.image import ensure_image

        factory = DockerSandboxFactory()
        factory.client  # noqa: B018 - pings the daemon
        ensure_image(quiet=True)
    except (ImportError, SandboxError) as exc:
        if in_ci():
            pytest.fail(f"CI=true but the docker sandbox is unavailable: {exc}", pytrace=False)
        pytest.skip(f"no Docker daemon answers ({exc}); run scripts/ensure-docker")
    yield factory
    factory.close_all()
    leaked = factory.sweep({SESSION_LABEL: SESSION_ID})
    assert leaked == 0, f"{leaked} sandbox container(s) of this test session were left behind"


@contextmanager
def open_labelled(factory: SandboxFactory, spec: SandboxSpec) -> Iterator[MakeSandbox]:
    """`make(**spec_overrides)` opens a sandbox labelled with this session and test; on exit
    every one is closed and none may be left (a failing assert names close() as the culprit)."""
    test_id = uuid.uuid4().hex[:12]
    opened: list[Sandbox] = []

    def make(**overrides: Any) -> Sandbox:
        labels = {SESSION_LABEL: SESSION_ID, TEST_LABEL: test_id, **overrides.pop("labels", {})}
        sandbox = factory.open(replace(spec, labels=labels, **overrides))
        opened.append(sandbox)
        return sandbox

    yield make
    for sandbox in opened:
        sandbox.close()
    remove_volumes = getattr(factory, "remove_volumes", None)
    volumes = remove_volumes({TEST_LABEL: test_id}) if remove_volumes else 0
    assert factory.sweep({TEST_LABEL: test_id}) == 0, "close() left a sandbox behind"
    assert volumes == 0, f"close() left {volumes} volume(s) behind"


@pytest.fixture(scope="session")
def plain_shell_image(docker_sandboxes: Any) -> Iterator[str]:
    """The runner image with its execute-only shell label emptied (the wrapper runs under the
    plain, readable bash, as on an image built without the shell): one per test process, its
    tag the process's own, so no xdist worker removes another's."""
    yield from runner_image_labelled(docker_sandboxes, "", f"plain-shell-{os.getpid()}")


def runner_image_labelled(factory: Any, shell_label: str, name: str) -> Iterator[str]:
    """The runner image with its execute-only shell label set to `shell_label` ("" : none; a
    readable shell's path: a lying label), built for this session as `name`, removed after."""
    import contextlib
    import io

    from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE

    client = factory.client
    dockerfile = f'FROM {DEFAULT_IMAGE}\nLABEL agentbench.private_shell="{shell_label}"\n'
    tag = f"agentbench-test/{name}:{SESSION_ID}"
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    yield tag
    with contextlib.suppress(Exception):
        client.images.remove(tag, force=True)


# A command's shell commands that find its wrapper (command bash <- timeout <- wrapper) and read
# the wrapper's nonce from /proc: what a hostile command tries on an image whose wrapper is
# readable (the red-team tests of the wrapper's lines).
WRAPPER_PID = "w=$(ps -o ppid= -p $PPID | tr -d ' ')"
STEAL_NONCE = (WRAPPER_PID + "; n=$(tr '\\0' '\\n' < /proc/$w/environ 2>/dev/null"
               " | sed -n 's/^AGENTBENCH_NONCE=//p')")
