"""The sandbox stage of one candidate: its environment, then its tests before and after the fix.

The parent commit is checked out from the mirror (only its own history), the test part is
applied and the touched test modules run `PRE_RUNS` times, then the fix part is applied and they
run `POST_RUNS` times more, every run in the sandbox with no network, its per-test results read
from pytest's junit XML (never from its output). The environment is built once per setup key
(the setup commands and the content of the manifests they came from): the first candidate with
a key runs the setup into a fresh /env, later ones mount that /env read-only and run none. A key
whose setup failed fails every candidate with it at once, with the first failure's reason.
"""

from __future__ import annotations

import os
import shlex
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest_agentbench.core.evidence as evidence
from pytest_agentbench.core.gitops import apply_command
from pytest_agentbench.harvest.junit_ids import node_outcomes
from pytest_agentbench.harvest.setup_infer import SetupPlan
from pytest_agentbench.repos.gitcmd import RepoError
from pytest_agentbench.repos.locks import file_lock
from pytest_agentbench.repos.mirror import MirrorCache
from pytest_agentbench.sandbox.port import Sandbox, SandboxError, SandboxFactory, SandboxSpec

PRE_RUNS, POST_RUNS = 2, 3
TESTS_PATCH, FIX_PATCH = ".git/agentbench-harvest-tests.patch", ".git/agentbench-harvest-fix.patch"
LABEL = "agentbench.harvest"


@dataclass(frozen=True)
class Bench:
    """Everything the sandbox stage needs, shared by every candidate of a harvest."""

    sandboxes: SandboxFactory
    mirrors: MirrorCache
    url: str
    image: str
    work_root: Path  # checkouts while they run
    env_root: Path  # one /env per setup key
    owner_uid: int | None = None
    ca_bundle: Path | None = None
    pip_cache: Path | None = None
    setup_timeout_sec: float = 600.0
    test_timeout_sec: float = 300.0
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class Runs:
    """What the sandbox stage saw: per-run outcomes by node id, or why it stopped."""

    pre: list[dict[str, str]] = field(default_factory=list)
    post: list[dict[str, str]] = field(default_factory=list)
    pre_exit: list[int] = field(default_factory=list)
    setup_ran: bool = False
    reason: str | None = None  # SETUP_FAILED, TESTS_PATCH_FAILED, FIX_PATCH_FAILED, ...
    detail: str = ""


def run_candidate(bench: Bench, name: str, parent: str, plan: SetupPlan, modules: list[str],
                  tests_patch: bytes, fix_patch: bytes) -> Runs:
    runs = Runs()
    dest = bench.work_root / f"{name}-{uuid.uuid4().hex[:6]}"
    try:
        bench.mirrors.checkout(bench.url, parent, dest, bench.owner_uid)
        env_dir = _environment(bench, plan, dest, runs)
        if env_dir is None:
            return runs
        _write(dest / TESTS_PATCH, tests_patch)
        _write(dest / FIX_PATCH, fix_patch)
        sandbox = bench.sandboxes.open(_spec(bench, dest, env_dir, plan, network=False))
        try:
            _test_runs(bench, sandbox, plan, modules, runs, bool(tests_patch))
        finally:
            sandbox.close()
    except RepoError as exc:
        runs.reason, runs.detail = "CHECKOUT_FAILED", str(exc)[:300]
    except (SandboxError, OSError) as exc:
        runs.reason, runs.detail = runs.reason or "SANDBOX_ERROR", str(exc)[:300]
    finally:
        shutil.rmtree(dest, ignore_errors=True)
        if not plan.commands:
            shutil.rmtree(dest.with_name(dest.name + ".env"), ignore_errors=True)
    return runs


def _test_runs(bench: Bench, sandbox: Sandbox, plan: SetupPlan, modules: list[str],
               runs: Runs, has_tests: bool = True) -> None:
    """`has_tests` False: a change without a test part (`task new`), its tests already there."""
    for patch, reason, target in ((TESTS_PATCH, "TESTS_PATCH_FAILED", runs.pre),
                                  (FIX_PATCH, "FIX_PATCH_FAILED", runs.post)):
        if patch == TESTS_PATCH and not has_tests:
            applied = None
        else:
            applied = sandbox.exec(apply_command(patch), timeout_sec=120)
        if applied is not None and not applied.ok:
            runs.reason, runs.detail = reason, applied.stderr.strip()[-300:]
            return
        for _ in range(PRE_RUNS if target is runs.pre else POST_RUNS):
            outcomes, code = _one_run(bench, sandbox, plan, modules)
            target.append(outcomes)
            if target is runs.pre:
                runs.pre_exit.append(code)


def test_command(plan: SetupPlan, tests: list[str]) -> str:
    """The pytest command a task runs `tests` with (node ids or module paths). A module that does
    not import (a feature's new test module, before the feature) must not stop the others from
    running, as pytest would: they may hold the bug fix's failing tests."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in plan.test_env)
    args = " ".join(shlex.quote(t) for t in tests)
    return (f"{env + ' ' if env else ''}python -m pytest -q -p no:cacheprovider "
            f"--continue-on-collection-errors {args}")


def _one_run(bench: Bench, sandbox: Sandbox, plan: SetupPlan,
             modules: list[str]) -> tuple[dict[str, str], int]:
    path = evidence.results_path()
    command = test_command(plan, modules) + " --rootdir=. -o junit_family=xunit2"
    result = sandbox.exec(f"{command} --junitxml={path}", timeout_sec=bench.test_timeout_sec)
    if result.timed_out:
        return {}, 124
    try:
        found = sandbox.exec(f"test -f {path} && cat {path}", timeout_sec=60, full_output=True)
        text = found.full_stdout if found.full_stdout is not None else found.stdout
        return (node_outcomes(text, modules) if found.ok else {}), result.exit_code
    except evidence.EvidenceError:
        return {}, result.exit_code


def _environment(bench: Bench, plan: SetupPlan, dest: Path, runs: Runs) -> Path | None:
    """The /env for this candidate: built now (the first with its key), reused, or None when
    the key's setup failed (runs says why)."""
    if not plan.commands:
        empty = dest.with_name(dest.name + ".env")
        empty.mkdir()
        _own(bench, empty)
        return empty
    key = plan.key()
    ready, failed = bench.env_root / key, bench.env_root / f"{key}.failed"
    with file_lock(bench.env_root / f"{key}.lock", shared=False,
                   timeout=bench.setup_timeout_sec * 3):
        if failed.is_file():
            runs.reason, runs.detail = "SETUP_FAILED", failed.read_text("utf-8")[:300]
            return None
        if ready.is_dir():
            return ready
        building = bench.env_root / f"{key}.tmp-{uuid.uuid4().hex[:6]}"
        building.mkdir(parents=True)
        _own(bench, building)
        problem = _setup(bench, plan, dest, building)
        runs.setup_ran = True
        if problem is not None:
            failed.write_text(problem, "utf-8")
            shutil.rmtree(building, ignore_errors=True)
            runs.reason, runs.detail = "SETUP_FAILED", problem
            return None
        building.rename(ready)
        return ready


def _setup(bench: Bench, plan: SetupPlan, dest: Path, env_dir: Path) -> str | None:
    network = plan.network_policy != "none"
    sandbox = bench.sandboxes.open(_spec(bench, dest, env_dir, plan, network=network,
                                         env_writable=True))
    try:
        for command in plan.commands:
            result = sandbox.exec(command, timeout_sec=bench.setup_timeout_sec)
            if result.timed_out:
                return f"timed out after {bench.setup_timeout_sec:g}s: {command}"
            if not result.ok:
                tail = (result.stderr.strip() or result.stdout.strip())[-200:]
                return f"exit {result.exit_code}: {command}: {tail}"
        return None
    finally:
        sandbox.close()


def _spec(bench: Bench, dest: Path, env_dir: Path, plan: SetupPlan, network: bool,
          env_writable: bool = False) -> SandboxSpec:
    return SandboxSpec(
        image=bench.image, workspace=dest, env_dir=env_dir, env_read_only=not env_writable,
        network=network, cpu_limit=1.0, mem_limit_mb=2048, pids_limit=512,
        lifetime_sec=bench.setup_timeout_sec + 6 * bench.test_timeout_sec + 300,
        labels={LABEL: "1", **bench.labels}, ca_bundle=bench.ca_bundle if network else None,
        pip_cache=bench.pip_cache if network else None, sync_back=env_writable)


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    os.chmod(path, 0o644)


def _own(bench: Bench, path: Path) -> None:
    if bench.owner_uid is not None:
        os.chown(path, bench.owner_uid, bench.owner_uid)
