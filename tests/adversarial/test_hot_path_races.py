"""Attacks on the hot path's scoring sandbox opened ahead (core/sandbox_ahead.py, commit bbc91e5):
scoring's sandbox starts, and the factory gives the pre-agent copy to the sandbox user, before
the harness writes the recorded diff into that copy."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pytest_agentbench.agents.builtin import OracleAgent
from tests.e2e.test_hot_path import kinds, run_attempt


def test_the_recorded_diff_reaches_the_sandbox_user_under_a_strict_umask(
        docker_sandboxes: Any, tmp_path: Path) -> None:
    """A root harness under umask 077 (hardened hosts): the diff file written after the
    sandbox's chown was root's, mode 0600, and the sandbox user could not read it."""
    old = os.umask(0o077)
    try:
        record, lines = run_attempt(docker_sandboxes, tmp_path, OracleAgent())
    finally:
        os.umask(old)
    assert record.result.passed, record.result
    assert kinds(lines).index("open score") < kinds(lines).index("close agent"), lines
