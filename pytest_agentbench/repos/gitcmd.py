"""Running the git CLI: fixed environment, timeouts, one-line errors.

Every git call in this package goes through :func:`run_git`, so none can prompt for
credentials, hang forever, or leak a raw ``CalledProcessError`` traceback.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

# `git rev-parse --local-env-vars`: variables that would point git at some other repository
# (e.g. when pytest runs inside a git hook).
_REPO_ENV_VARS = frozenset(
    {
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_OBJECT_DIRECTORY",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_GRAFT_FILE",
        "GIT_INDEX_FILE",
        "GIT_NO_REPLACE_OBJECTS",
        "GIT_REPLACE_REF_BASE",
        "GIT_PREFIX",
        "GIT_INTERNAL_SUPER_PREFIX",
        "GIT_SHALLOW_FILE",
        "GIT_COMMON_DIR",
    }
)

_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")

#: The transports git may use. Remote helpers (`ext::` runs a shell command, `fd::`, any
#: `git-remote-<name>` on PATH) are never allowed, whatever a URL or a config file says.
ALLOWED_PROTOCOLS = ("file", "git", "http", "https", "ssh")
_PROTOCOL_POLICY = [
    "-c",
    "protocol.allow=never",
    *(arg for name in ALLOWED_PROTOCOLS for arg in ("-c", f"protocol.{name}.allow=always")),
]


class RepoError(Exception):
    """A repository could not be prepared; the message is one line meant for people.

    Callers map it to the SETUP_FAILED reason code.
    """


class GitFailed(RepoError):
    """A git command exited non-zero (or timed out); ``summary`` is git's key stderr line."""

    def __init__(self, args: Sequence[str], returncode: int, summary: str) -> None:
        self.returncode = returncode
        self.summary = summary
        verb = next((a for a in args if not a.startswith("-") and "=" not in a), "git")
        super().__init__(f"git {verb} failed: {summary}")


def redact(text: str) -> str:
    """Hide credentials embedded in URLs: ``https://user:tok@host`` -> ``https://***@host``."""
    return _CREDENTIALS.sub("***@", text)


def stderr_summary(stderr: str) -> str:
    """The most useful single line of git's stderr (first fatal/error line, else the last)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                return redact(line[len(prefix) :])
    return redact(lines[-1]) if lines else "no error output"


def git_env() -> dict[str, str]:
    """The environment for git: never prompt, stable English messages, no inherited repo,
    only the allowed transports (GIT_ALLOW_PROTOCOL overrides every protocol.* setting)."""
    env = {k: v for k, v in os.environ.items() if k not in _REPO_ENV_VARS}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GCM_INTERACTIVE="never",
        LC_ALL="C",
        GIT_ALLOW_PROTOCOL=":".join(ALLOWED_PROTOCOLS),
        GIT_PROTOCOL_FROM_USER="0",
    )
    if "GIT_SSH_COMMAND" not in env and "GIT_SSH" not in env:
        env["GIT_SSH_COMMAND"] = "ssh -o BatchMode=yes"
    return env


def run_git(
    args: Sequence[str],
    *,
    timeout: float,
    cwd: Path | None = None,
    stdin: str | None = None,
    umask: int = -1,
) -> str:
    """Run ``git *args`` and return stdout; raise :class:`GitFailed` on failure or timeout.

    git runs in its own process group so a timeout (or Ctrl-C) kills its helpers too
    (``git-remote-https``, ``upload-pack``), not just the top process. Callers put ``--`` before
    every URL and path they pass; the protocol policy is pinned on every call.
    """
    cmd = ["git", *_PROTOCOL_POLICY, *args]
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=git_env(),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            umask=umask,
        )
    except FileNotFoundError as exc:
        raise RepoError("git is not installed or not on PATH") from exc
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise GitFailed(args, -1, f"timed out after {timeout:g}s") from None
    except BaseException:
        _kill_group(proc)
        raise
    if proc.returncode != 0:
        raise GitFailed(args, proc.returncode, stderr_summary(err))
    return out


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
