"""Attacks on the hot path's scoring sandbox opened ahead (core/sandbox_ahead.py, commit bbc91e5):
scoring's sandbox starts, and the factory gives the pre-agent copy to the sandbox user, before
the harness writes the recorded diff into that copy."""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from pytest_agentbench.agents.builtin import OracleAgent
from pytest_agentbench.core.pipeline import AttemptPipeline
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.run.hostenv import SANDBOX_UID
from pytest_agentbench.sandbox.port import SandboxError, SandboxSpec
from pytest_agentbench.schemas.taxonomy import Reason
from pytest_agentbench.tasks.discovery import discover
from tests.e2e.test_hot_path import ROOT, TASK, factory_image, kinds, run_attempt
from tests.support.attempts import attempt_config


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


def test_the_engine_client_serves_a_thread_opening_sandboxes_while_another_execs(
        make_docker_sandbox: Any, tmp_path: Path) -> None:
    """Scoring's sandbox opens in a thread while the main thread execs the final snapshot and
    removes the agent's sandbox, through one docker-py client: neither sees the other's
    answers, and nothing raises."""
    busy = make_docker_sandbox()
    other = tmp_path / "other"
    other.mkdir()
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            for n in range(4):
                sandbox = make_docker_sandbox(workspace=other)
                ran = sandbox.exec(f"echo up{n}", timeout_sec=60)
                assert (ran.exit_code, ran.stdout) == (0, f"up{n}\n"), ran
                sandbox.close()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    outs: list[tuple[int | None, str, str]] = []
    lost = 0
    while thread.is_alive() or len(outs) < 20:
        i = len(outs)
        ran = busy.exec(f"printf %s {i}; printf e{i} >&2", timeout_sec=60)
        if ran.output_lost:  # the engine's known fault (tests/docker/test_lost_exec_output.py):
            lost += 1  # flagged, its status the engine's; nothing of another exec's in it
            assert (ran.exit_code, ran.stdout) == (0, ""), ran
            outs.append((0, str(i), f"e{i}"))
            continue
        outs.append((ran.exit_code, ran.stdout, ran.stderr))
    thread.join(60)
    assert errors == []
    assert outs == [(0, str(i), f"e{i}") for i in range(len(outs))]
    assert lost <= 2, f"{lost} of {len(outs)} outputs lost"


class InterruptedFinalDiff:
    """The engine's factory, but Ctrl-C arrives as the agent's final snapshot is asked for, while
    scoring's sandbox is being opened ahead."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.opened = inner, []

    def open(self, spec: SandboxSpec) -> Any:
        sandbox = self.inner.open(spec)
        self.opened.append((spec.labels.get("agentbench.phase"), sandbox))
        return Interrupting(sandbox) if spec.labels.get("agentbench.phase") == "agent" else sandbox

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Interrupting:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def exec(self, command: str, **kwargs: Any) -> Any:
        if "LAST=1" in command:
            raise KeyboardInterrupt
        return self.inner.exec(command, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_ctrl_c_during_the_final_diff_leaves_no_scoring_sandbox(
        docker_sandboxes: Any, tmp_path: Path) -> None:
    import docker
    import pytest

    task = {t.id: t for t in discover(ROOT / "taskpacks", ["custom-dev"]).tasks}[TASK]
    run_id = f"hot-{uuid.uuid4().hex[:8]}"
    cfg = attempt_config(tmp_path, run_id, image=factory_image(), owner_uid=SANDBOX_UID)
    factory = InterruptedFinalDiff(docker_sandboxes)
    with pytest.raises(KeyboardInterrupt):
        AttemptPipeline(task, cfg, factory, MirrorCache(tmp_path / "git"), OracleAgent()).run()
    assert [phase for phase, _ in factory.opened] == ["agent", "score"]
    assert all(sandbox.closed for _, sandbox in factory.opened)
    left = docker.from_env().containers.list(
        all=True, filters={"label": [f"agentbench.run_id={run_id}"]})
    assert left == []


def test_hidden_tests_and_a_regrade_reach_the_sandbox_user_under_a_strict_umask(
        docker_sandboxes: Any, tmp_path: Path) -> None:
    """The hidden tests' patch is written into the pre-agent copy after scoring's sandbox
    opened ahead, as the diff is (the plugin in a subprocess, under umask 077 as root)."""
    from tests.support.hidden_pack import make_pack, run_variant

    pack = make_pack(tmp_path)
    old = os.umask(0o077)
    try:
        record, _ = run_variant(tmp_path, pack, "oracle", "docker", None,
                                "--agentbench-regrade=1")
    finally:
        os.umask(old)
    assert record["result"]["passed"] is True, record["result"]
    assert [r.get("passed") for r in record["result"]["regrades"]] == [True], record["result"]
