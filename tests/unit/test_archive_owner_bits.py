"""A directory shipped to a remote engine as a root-owned read-only copy (a command agent's
program: sandbox/docker/shipped_mounts.py) keeps what its owner could read and run for everyone, and
no write bit: an install's staging directory is 0700, and the sandbox user, no longer its owner
there, must still run the program in it."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from pytest_agentbench.sandbox.archives import tar_chunks


def _modes(chunks: bytes) -> dict[str, tuple[int, int]]:
    with tarfile.open(fileobj=io.BytesIO(chunks)) as tar:
        return {m.name: (m.mode, m.uid) for m in tar.getmembers()}


def test_owner_bits_for_all_gives_read_and_run_never_write(tmp_path: Path) -> None:
    program = tmp_path / "program"
    (program / "bin").mkdir(parents=True)
    (program / "bin" / "agent").write_text("#!/bin/sh\n")
    (program / "data.txt").write_text("x")
    program.chmod(0o700)
    (program / "bin").chmod(0o770)
    (program / "bin" / "agent").chmod(0o777)
    (program / "data.txt").chmod(0o600)
    shipped = _modes(b"".join(tar_chunks([("extra0", program)], 0, 0, owner_bits_for_all=True)))
    assert shipped == {"extra0": (0o755, 0), "extra0/bin": (0o755, 0),
                       "extra0/bin/agent": (0o755, 0), "extra0/data.txt": (0o644, 0)}
    as_is = _modes(b"".join(tar_chunks([("extra0", program)], 0, 0)))
    assert as_is["extra0"] == (0o700, 0) and as_is["extra0/data.txt"] == (0o600, 0)
