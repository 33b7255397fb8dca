"""The harness's own short execs in a sandbox, each an exec of its own (not the command
wrapper's): whether the image's labelled shell is execute-only, the workspace's size, and the
wake-up of a stopped held shell."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest_agentbench.sandbox.disk as disk
import pytest_agentbench.sandbox.docker.exec_stream as exec_stream
from pytest_agentbench.sandbox.docker.containers import DockerErrors

MEASURE_MAX_SEC = 300.0  # the disk measure (du of the workspace): only a silent engine meets it
_PRIVATE = ('[ -x "$1" ] && [ ! -r "$1" ] && [ ! -w "$1" ] && [ ! -L "$1" ] && '
            '[ "$(stat -c %u "$1")" = 0 ] && echo private')


def shell_is_private(api: Any, container_id: str, shell: str, user: str) -> bool:
    """Whether `shell` is one the command user can neither read nor write, and root owns (an
    image may label any file so). Raises the engine's errors."""
    exec_id = api.exec_create(container_id, ["/bin/sh", "-c", _PRIVATE, "sh", shell],
                              user=user)["Id"]
    return exec_stream.output(api, exec_id).decode(errors="replace").strip() == "private"


def workspace_usage(api: Any, container_id: str, shell: str, user: str,
                    workdir: str) -> str | None:
    """The workspace's size measured in the container (disk.MEASURE_SCRIPT, as the command
    user): the field DiskGuard reads, None when it cannot be had. Raises the engine's errors."""
    exec_id = api.exec_create(container_id, [shell, "-p", "-c", disk.MEASURE_SCRIPT,
                                             "agentbench", workdir], user=user)["Id"]
    # du on a large workspace can take a while: a bound for a silent engine only
    output = exec_stream.output(api, exec_id, timeout_sec=MEASURE_MAX_SEC)
    return disk.script_usage(output.decode(errors="replace"))


def wake_user(api: Any, container_id: str, shell: str, user: str) -> None:
    """SIGCONT to every process of the command user (best effort): the held wrapper shell, if
    something stopped it, goes on with the request it was sent (sandbox/docker/held_shell.py).
    Between two commands nothing else of that user runs, and nothing is killed or run twice."""
    with contextlib.suppress(*DockerErrors):
        exec_id = api.exec_create(container_id, [shell, "-p", "-c", "kill -CONT -1 2>/dev/null"],
                                  user=user)["Id"]
        exec_stream.output(api, exec_id)
