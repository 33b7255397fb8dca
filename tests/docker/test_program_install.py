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
