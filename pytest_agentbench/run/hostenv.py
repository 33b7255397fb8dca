"""Host-side defaults every entry point shares (pytest fixtures, replay, validate-tasks, doctor):
who owns the workspace, where the pip and environment caches live, which CA bundle to mount."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from pytest_agentbench.run.envcaches import open_env_cache

# The runner image's non-root user `agentbench` (pytest_agentbench/runner/Dockerfile says why
# this uid), the same number as sandbox/docker_policy.SANDBOX_UID, which this module does not
# import (no docker here).
SANDBOX_UID = 70000
CA_ENV_VARS = ("AGENTBENCH_CA_BUNDLE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")


def owner_uid(sandbox: str = "docker") -> int | None:
    """Docker sandboxes run as SANDBOX_UID: a root harness hands the workspace over to it."""
    return SANDBOX_UID if sandbox == "docker" and os.geteuid() == 0 else None


def work_root(run_id: str) -> Path:
    """Where a run's per-attempt checkouts live while they run (removed at session end)."""
    return Path(tempfile.gettempdir()) / f"agentbench-work-{os.getuid()}" / run_id


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


def trial_defaults(sandbox: str = "docker", ca_bundle: str = "auto") -> dict[str, Any]:
    """The host's owner uid, pip cache, CA bundle and environment cache as keyword arguments of
    `run.factory.SharedAttemptConfig`, for entry points outside pytest (replay, validate-tasks)."""
    ca = resolve_ca_bundle(ca_bundle)
    return {
        "owner_uid": owner_uid(sandbox),
        "pip_cache": pip_cache_dir(),
        "ca_bundle": Path(ca) if ca else None,
        "env_cache": open_env_cache(None, None, "$AGENTBENCH_ENV_CACHE_MAX_SIZE"),
    }
