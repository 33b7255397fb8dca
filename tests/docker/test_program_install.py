"""A command agent's program install (core/program_install.py) in real Docker sandboxes: it
fills the cache entry once (two workers asking at once wait for one install), the program is
found where the agent sandbox mounts it, a failed install leaves no entry (nor a staging
directory) and says why in one line, and `installed_dirs` finds only these install commands."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.agents.port import ProgramNeeds
from pytest_agentbench.core.program_install import (
    DONE_FILE,
    PROGRAM_TARGET,
    ProgramInstallError,
    ensure_installed,
    installed_dirs,
)
from pytest_agentbench.sandbox.port import ExtraMount
from tests.support.sandboxes import SESSION_ID, SESSION_LABEL, small_spec

INSTALL = ('mkdir -p "$AGENTBENCH_PROGRAM_DIR/bin" && printf "#!/bin/sh\\necho hello from '
           '$AGENTBENCH_PROGRAM_DIR\\n" > "$AGENTBENCH_PROGRAM_DIR/bin/hi" && '
           'chmod +x "$AGENTBENCH_PROGRAM_DIR/bin/hi" && test -d "$TMPDIR" && '
           'echo installs=1 >> "$AGENTBENCH_PROGRAM_DIR/count"')


def _base(tmp_path: Path) -> Any:
    return small_spec(tmp_path, labels={SESSION_LABEL: SESSION_ID})


def test_one_install_for_two_workers_then_mounted_read_only(
        tmp_path: Path, docker_sandboxes: Any) -> None:
    root = tmp_path / "programs"
    root.mkdir()
    results: list[Any] = []

    def worker() -> None:
        results.append(ensure_installed(ProgramNeeds(install=INSTALL), docker_sandboxes,
                                        base, root))

    base = _base(tmp_path)
    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert len(results) == 2
    dirs = {needs.program_dir for needs, _ in results}
    assert len(dirs) == 1
    (program,) = dirs
    assert sorted(fresh for _, fresh in results) == [False, True]
    assert (program / "count").read_text() == "installs=1\n"
    assert (program / DONE_FILE).read_text() == INSTALL
    assert not (program / ".install-tmp").exists()
    assert [p.name for p in root.iterdir() if not p.name.endswith(".lock")] == [program.name]
    assert installed_dirs(INSTALL, root) == [program]
    assert installed_dirs(INSTALL + " ", root) == []

    spec = replace(base, extra_mounts=(ExtraMount(program, PROGRAM_TARGET,
                                                  "AGENTBENCH_PROGRAM_DIR"),))
    sandbox = docker_sandboxes.open(spec)
    try:
        ran = sandbox.exec('"$AGENTBENCH_PROGRAM_DIR/bin/hi"; touch "$AGENTBENCH_PROGRAM_DIR/x"',
                           timeout_sec=60)
    finally:
        sandbox.close()
    assert f"hello from {PROGRAM_TARGET}" in ran.stdout
    assert ran.exit_code != 0 and "Read-only" in ran.stderr  # the agent cannot change it


def test_a_failed_install_leaves_nothing_and_says_why(
        tmp_path: Path, docker_sandboxes: Any) -> None:
    root = tmp_path / "programs"
    root.mkdir()
    with pytest.raises(ProgramInstallError, match=r"install exited 3: .*no such package"):
        ensure_installed(ProgramNeeds(install="echo no such package >&2; exit 3"),
                         docker_sandboxes, _base(tmp_path), root)
    assert [p.name for p in root.iterdir() if not p.name.endswith(".lock")] == []


def test_a_program_installed_through_an_archive_engine_runs_on_a_bind_one(
        tmp_path: Path, docker_sandboxes: Any) -> None:
    """One cache entry per image serves every engine: installed through an engine that takes
    archives (the staging directory travels and comes back as the harness's own), it must still
    be usable by the sandbox user where it is bind-mounted. A CI run installed mini-swe-agent
    through the second engine first, and every local attempt then exited 126."""
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    root = tmp_path / "programs"
    root.mkdir()
    base = _base(tmp_path)
    archive = DockerSandboxFactory(transfer="archive")
    needs, fresh = ensure_installed(ProgramNeeds(install=INSTALL), archive, base, root)
    assert fresh and needs.program_dir is not None
    spec = replace(base, extra_mounts=(ExtraMount(needs.program_dir, PROGRAM_TARGET,
                                                  "AGENTBENCH_PROGRAM_DIR"),))
    sandbox = docker_sandboxes.open(spec)
    try:
        ran = sandbox.exec('"$AGENTBENCH_PROGRAM_DIR/bin/hi"', timeout_sec=60)
    finally:
        sandbox.close()
    assert ran.exit_code == 0 and f"hello from {PROGRAM_TARGET}" in ran.stdout, ran
    needs.program_dir.chmod(0o700)  # an entry made so before the fix is opened when found
    again, fresh = ensure_installed(ProgramNeeds(install=INSTALL), docker_sandboxes, base, root)
    assert not fresh and again.program_dir == needs.program_dir
    assert needs.program_dir.stat().st_mode & 0o777 == 0o755
