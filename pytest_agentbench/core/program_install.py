"""A command agent's program, installed once per (image, install commands) and then mounted
read-only into every agent sandbox that runs it.

The install runs in a sandbox of its own with the network (the setup's: the CA bundle of a
TLS-intercepting proxy, the pip cache), never during the agent phase and never on the agent's
clock: its directory is the sandbox's workdir, `AGENTBENCH_PROGRAM_DIR` (the path it is mounted
at later, so a virtualenv's scripts find their interpreter). It is built in a staging
directory and renamed into place only when the install command succeeded, under a lock, so
concurrent workers install once and nobody mounts half an install. Its output is kept in the
cache entry (`install.log`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from pytest_agentbench.agents.port import ProgramNeeds
from pytest_agentbench.paths.held_lock import held_exclusively
from pytest_agentbench.sandbox.port import SandboxFactory, SandboxSpec

PROGRAM_TARGET = "/opt/agentbench/program"  # where the sandbox sees it, at install and after
INSTALL_TIMEOUT_SEC = 1800.0
DONE_FILE = ".agentbench-installed"
TMP_DIR = ".install-tmp"


class ProgramInstallError(Exception):
    """The install command failed: one line with its exit status and the tail of its output."""


def program_cache_root() -> Path:
    root = Path(os.environ.get("AGENTBENCH_PROGRAM_CACHE",
                               Path.home() / ".cache/agentbench/programs"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def installed_dirs(install: str, root: Path | None = None) -> list[Path]:
    """Finished installs of these install commands (one per runner image they ran on)."""
    root = root or program_cache_root()
    found = []
    for done in sorted(root.glob(f"*/{DONE_FILE}")):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if done.read_text("utf-8") == install:
                found.append(done.parent)
    return found


def install_key(image: str, install: str) -> str:
    return hashlib.sha256(f"{image}\n{install}".encode()).hexdigest()[:16]


def ensure_installed(needs: ProgramNeeds, sandboxes: SandboxFactory, base: SandboxSpec,
                     root: Path | None = None) -> tuple[ProgramNeeds, bool]:
    """`needs` with `program_dir` set to the installed program (installing it first when no
    finished install exists), and whether this call installed it. `base`: a setup sandbox's
    spec (image, network, CA bundle, limits, labels) to install with."""
    if needs.install is None:
        return needs, False
    root = root or program_cache_root()
    final = root / install_key(base.image, needs.install)
    if (final / DONE_FILE).is_file():
        _open_to_all(final)
        return replace(needs, program_dir=final), False
    with held_exclusively(root / f"{final.name}.lock"):
        if (final / DONE_FILE).is_file():  # another worker finished it while we waited
            return replace(needs, program_dir=final), False
        staging = Path(tempfile.mkdtemp(prefix=f"{final.name}.", dir=root))
        try:
            _install(needs.install, sandboxes, base, staging)
            # mkdtemp made it 0700: a bind engine gives it to the sandbox user, an archive
            # engine's copy comes back as ours; either way every engine's sandbox user must
            # reach it (it is mounted read-only, so reading is all it can do)
            staging.chmod(0o755)
            shutil.rmtree(final, ignore_errors=True)
            staging.rename(final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return replace(needs, program_dir=final), True


def _open_to_all(entry: Path) -> None:
    """An entry installed through an archive engine before installs were opened to every user
    (root's, 0700): opened now, so the sandbox user can reach it."""
    if entry.stat().st_mode & 0o005 != 0o005:
        entry.chmod(0o755)


def _install(install: str, sandboxes: SandboxFactory, base: SandboxSpec, staging: Path) -> None:
    env_dir = Path(tempfile.mkdtemp(prefix="agentbench-install-env-"))
    # the sandbox's /tmp is a small tmpfs: an installer's temporary files go beside the
    # install (removed after it)
    (staging / TMP_DIR).mkdir()
    env = {**base.env, "AGENTBENCH_PROGRAM_DIR": PROGRAM_TARGET,
           "TMPDIR": f"{PROGRAM_TARGET}/{TMP_DIR}"}
    spec = replace(base, workspace=staging, env_dir=env_dir, workdir=PROGRAM_TARGET,
                   network=True, env_read_only=False, disk_limit_mb=None, extra_mounts=(),
                   sync_back=True, env=env, lifetime_sec=INSTALL_TIMEOUT_SEC + 300)
    sandbox = sandboxes.open(spec)
    try:
        result = sandbox.exec(install, timeout_sec=INSTALL_TIMEOUT_SEC, full_output=True)
    finally:
        sandbox.close()
        shutil.rmtree(env_dir, ignore_errors=True)
    shutil.rmtree(staging / TMP_DIR, ignore_errors=True)
    log = (result.full_stdout or result.stdout) + (result.full_stderr or result.stderr)
    (staging / "install.log").write_text(log, "utf-8")
    if result.exit_code != 0 or result.timed_out:
        tail = " | ".join(log.strip().splitlines()[-3:])[-400:]
        raise ProgramInstallError(
            f"the agent program's install exited {result.exit_code}"
            f"{' (timed out)' if result.timed_out else ''}: {tail}")
    (staging / DONE_FILE).write_text(install, "utf-8")
