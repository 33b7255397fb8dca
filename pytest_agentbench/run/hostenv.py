"""Host-side defaults every entry point shares (pytest fixtures, replay, validate-tasks, doctor):
who owns the workspace, where the pip and environment caches live, which CA bundle to mount."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from pytest_agentbench.run.envcaches import open_env_cache

# The runner image's non-root user `agentbench` (pytest_agentbench/runner/Dockerfile says why
# this uid), the same number as sandbox/docker/policy.SANDBOX_UID, which this module does not
# import (no docker here).
SANDBOX_UID = 70000
CA_ENV_VARS = ("AGENTBENCH_CA_BUNDLE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")


def owner_uid(sandbox: str = "docker") -> int | None:
    """Docker sandboxes run as SANDBOX_UID: a root harness hands the workspace over to it."""
    return SANDBOX_UID if sandbox == "docker" and os.geteuid() == 0 else None


class WorkRootError(Exception):
    """The work root cannot be trusted (another user's, a link, writable by others): one line."""


def work_base() -> Path:
    """`$TMPDIR/agentbench-work-<uid>`, the parent of every run's work root: made 0700 by us
    (mkdir semantics, never through a link), or, when it exists, checked to be a directory
    (not a link) that we own and nobody else may write, and narrowed to 0700. Everything a run
    keeps under it (checkouts, pre-agent copies, engine slots) is then out of other users'
    reach, whatever its own modes: $TMPDIR is shared, its names are predictable, and a
    directory or link another user planted there first is refused (WorkRootError), never used.
    """
    base = Path(tempfile.gettempdir()) / f"agentbench-work-{os.getuid()}"
    private_dir(base, "work root")
    return base


def private_dir(path: Path, what: str) -> None:
    """Create `path` 0700, or accept the existing one only when it is a real directory owned by
    this user that neither group nor other can write (then made 0700); WorkRootError else."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise WorkRootError(f"{what} {path}: cannot create it ({exc.strerror})") from None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        try:
            link = stat.S_ISLNK(os.lstat(path).st_mode)
        except OSError:
            link = False
        why = "is a symbolic link" if link else f"is not a usable directory ({exc.strerror})"
        raise WorkRootError(f"{what} {path} {why}: refused (remove it, or set TMPDIR to a "
                            "directory of your own)") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise WorkRootError(
                f"{what} {path} is owned by uid {st.st_uid}, not by this user "
                f"({os.geteuid()}): refused (another user may have made it first; remove it, "
                "or set TMPDIR to a directory of your own)")
        if st.st_mode & 0o022:
            raise WorkRootError(
                f"{what} {path} is writable by group or other (mode "
                f"{stat.S_IMODE(st.st_mode):o}): refused (what is under it may not be ours; "
                "remove it, or set TMPDIR to a directory of your own)")
        if st.st_mode & 0o077:
            os.fchmod(fd, 0o700)  # an older harness made it 0755
    finally:
        os.close(fd)


def work_root(run_id: str, session: str = "") -> Path:
    """Where a run's per-attempt checkouts live while they run (removed at session end), under
    the private `work_base()` (WorkRootError when it cannot be trusted); one per pytest
    `session` when given, so two sessions under one run name (a named run in two projects at
    once) never remove each other's checkouts."""
    return work_base() / (f"{run_id}@{session}" if session else run_id)


def pip_cache_dir() -> Path:
    root = Path(os.environ.get("AGENTBENCH_PIP_CACHE", Path.home() / ".cache/agentbench/pip"))
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(root, SANDBOX_UID, SANDBOX_UID)
    return root


def resolve_ca_bundle(value: str = "auto") -> str | None:
    """Path of the CA bundle to mount, or None. A named file that does not exist is an error."""
    if value == "none":
        return None
    if value == "auto":
        for var in CA_ENV_VARS:
            candidate = os.environ.get(var)
            if candidate and Path(candidate).is_file():
                return str(Path(candidate).resolve())
        return None
    if not Path(value).is_file():
        raise ValueError(f"--agentbench-ca-bundle {value}: no such file")
    return str(Path(value).resolve())


def attempt_defaults(sandbox: str = "docker", ca_bundle: str = "auto") -> dict[str, Any]:
    """The host's owner uid, pip cache, CA bundle and environment cache as keyword arguments of
    `run.factory.SharedAttemptConfig`, for entry points outside pytest (replay, validate-tasks)."""
    ca = resolve_ca_bundle(ca_bundle)
    return {
        "owner_uid": owner_uid(sandbox),
        "pip_cache": pip_cache_dir(),
        "ca_bundle": Path(ca) if ca else None,
        "env_cache": open_env_cache(None, None, "$AGENTBENCH_ENV_CACHE_MAX_SIZE"),
    }
