"""Attacks on the hot path's scoring sandbox opened ahead (core/sandbox_ahead.py, commit bbc91e5):
scoring's sandbox starts, and the factory gives the pre-agent copy to the sandbox user, before
the harness writes the recorded diff into that copy."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pytest_agentbench.agents.builtin import OracleAgent
from pytest_agentbench.sandbox.port import SandboxError, SandboxSpec
from pytest_agentbench.schemas.taxonomy import Reason
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


class FailingScoreOpen:
    """The engine's factory, but scoring's sandbox takes `seconds` to fail to start."""

    def __init__(self, inner: Any, seconds: float) -> None:
        self.inner, self.seconds = inner, seconds

    def open(self, spec: SandboxSpec) -> Any:
        if spec.labels.get("agentbench.phase") == "score":
            time.sleep(self.seconds)
            raise SandboxError("cannot start the sandbox container: refused by the test")
        return self.inner.open(spec)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_scoring_sandbox_that_fails_to_start_ahead_still_counts_its_start_time(
        docker_sandboxes: Any, tmp_path: Path) -> None:
    """timings.sandbox_start left out the time of a start that raised in the thread (the
    attempt's own open_sandbox counts it, raised or not)."""
    record, _ = run_attempt(FailingScoreOpen(docker_sandboxes, 1.5), tmp_path, OracleAgent())
    assert record.result.failure_reason == Reason.SANDBOX_ERROR, record.result
    assert "refused by the test" in (record.result.summary or ""), record.result
    assert record.timings["sandbox_start"] >= 1.5, record.timings
