"""What runs before the agent: checkout (prepare), setup or its env-cache snapshot, baseline.

None of it is on the agent's clock (agent_phase.py starts it when the agent gets control), so
an env-cache hit and a miss give the agent the same time. Each part has its own bound instead:
the checkout git's timeouts and lock waits (repos/), the setup commands `setup_timeout_sec`
together, each capture command and each baseline run `tool_timeout_sec`; the sandbox's own
lifetime (attempt_config.sandbox_spec) is the backstop. How long setup and baseline took is
recorded (`setup.duration_sec`, `baseline_validation.duration_sec`, `timings`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest_agentbench.core.baseline as baseline_mod
import pytest_agentbench.core.hidden_tests as hidden_tests
from pytest_agentbench.core.attempt import Attempt, Failure
from pytest_agentbench.core.attempt_config import pip_cache_dir
from pytest_agentbench.core.envcache import CacheHold, cache_key
from pytest_agentbench.core.git_scripts import GIT
from pytest_agentbench.core.gitops import START_SCRIPT, Snapshotter
from pytest_agentbench.repos.sources import resolve_source
from pytest_agentbench.sandbox.port import ExecResult, Sandbox, SandboxError
from pytest_agentbench.schemas.records import SetupInfo
from pytest_agentbench.schemas.taxonomy import Reason

if TYPE_CHECKING:
    from pytest_agentbench.repos.mirror import MirrorCache


def prepare(at: Attempt, mirrors: MirrorCache) -> None:
    """The task's repository checked out into the workspace, unless its env-cache entry exists
    (another worker building it is waited for): setup restores that instead. The environment
    report begun."""
    spec, cfg = at.spec, at.cfg
    source = resolve_source(spec.repo.url, at.task.task_dir)
    at.workspace.mkdir(parents=True, exist_ok=True)
    at.found.commit = mirrors.resolve(source, spec.repo.commit)
    at.environment["harness"] = {
        "version": cfg.shared.harness_version,
        "image": cfg.shared.image,
        "image_id": cfg.shared.image_id,
        "image_digest": cfg.shared.image_digest,
        "ca_bundle": str(cfg.shared.ca_bundle) if cfg.shared.ca_bundle else None,
        "pip_cache": str(cfg.shared.pip_cache) if cfg.shared.pip_cache else None,
        "network_policy": spec.environment.network_policy,
    }
    if _find_cached_environment(at):
        return
    at.provision("repo")
    checkout = mirrors.checkout(
        source, at.found.commit, at.workspace / "repo", owner_uid=cfg.shared.owner_uid
    )
    at.env_dir.mkdir(exist_ok=True)
    if cfg.shared.owner_uid is not None:
        os.chown(at.env_dir, cfg.shared.owner_uid, cfg.shared.owner_uid)
    at.environment["repo"] = {
        "commit": checkout.commit,
        "fetched": checkout.fetched,
        "checkout_sec": round(checkout.seconds, 3),
    }


def _find_cached_environment(at: Attempt) -> bool:
    """Use the env-cache entry of this attempt's key (waiting while another worker builds it),
    or keep the right to build it (`at.cache_claim`). True when the workspace is its view."""
    cache = at.cfg.shared.env_cache
    if cache is None or not at.spec.setup.commands:
        return False
    at.cache_key = _env_cache_key(at)
    info = at.environment["env_cache"]
    with at.timed("env_cache_lookup"):
        at.cache_hold = cache.open(at.cache_key)
        if at.cache_hold is None:
            at.cache_claim = cache.claim(at.cache_key, at.spec.environment.setup_timeout_sec)
            at.cache_hold, at.cache_claim.hold = at.cache_claim.hold, None
            info["waited_sec"] = at.cache_claim.waited_sec
    if at.cache_hold is None:
        return False
    at.environment["repo"] = {"commit": at.found.commit, "from_env_cache": at.cache_key}
    return True


def _restore(at: Attempt, hold: CacheHold) -> None:
    """The workspace becomes a view of the entry's; /env its env dir, never writable."""
    started = time.monotonic()
    info = at.environment["env_cache"]
    info["restore"] = at.provision_from("repo", hold.repo)
    if at.sandboxes.read_only_mounts:
        at.env_dir = hold.env  # mounted read-only in every sandbox from now on
    else:
        at.provision_from("env", hold.env)
    info["restore_sec"] = round(time.monotonic() - started, 3)


def setup(at: Attempt) -> Sandbox:
    """Run the setup commands and cache what they left (or restore that from the env cache)
    and return the agent's sandbox: never the setup sandbox (writable /env, caches, network)."""
    spec = at.spec
    policy = spec.environment.network_policy
    setup_net, agent_net = policy in ("setup_only", "always"), policy == "always"
    commands = spec.setup.commands
    started = time.monotonic()
    with at.phase_timer("setup"):
        info = at.found.setup = SetupInfo(attempted=True, commands=len(commands))
        claim = at.cache_claim
        info.env_cache_wait_sec = claim.waited_sec if claim is not None else 0.0
        if at.cache_hold is not None:
            _restore(at, at.cache_hold)
            info.reused_snapshot = True
            info.env_cache = "hit_after_wait" if claim is not None else "hit"
            commands, setup_net = [], agent_net
        info.network = setup_net and bool(commands)
        phase = "setup" if commands else "agent"
        sandbox = at.open_sandbox(network=setup_net if commands else agent_net, phase=phase)
        try:
            if at.cache_hold is not None:
                _reuse_capture_logs(at, at.cache_hold)  # the entry was verified clean when built
            else:
                _run_setup_commands(at, sandbox, commands)
                for command in spec.setup.capture:
                    at.run_command(sandbox, "capture", command, spec.environment.tool_timeout_sec)
                # no setup and no capture command: nothing ran in the workspace since the
                # harness checked it out, so there is nothing to check (one exec fewer)
                dirty, stat = (dirty_tracked_files(sandbox) if commands or spec.setup.capture
                               else ([], ""))
                info.dirty_files, info.diff_stat = dirty, stat
                at.paths.log("setup_diff_stat.txt").write_text(stat + "\n", "utf-8")
            if info.dirty_files:
                info.ok = False
                raise Failure(
                    Reason.SETUP_DIRTY_WORKTREE,
                    f"setup changed tracked files: {', '.join(info.dirty_files[:5])}",
                )
            info.ok = True
            if commands:
                # closed first: on an engine that shares no filesystem with us, what setup left
                # reaches the host directories (the snapshot's source) when its sandbox closes
                sandbox.close()
                if at.cache_key is not None:
                    info.env_cache = _save_env_snapshot(at, time.monotonic() - started)
        finally:
            info.duration_sec = round(time.monotonic() - started, 3)
    if commands:
        sandbox = at.open_sandbox(network=agent_net, phase="agent")
    return sandbox


CAPTURE_LOGS = ("capture_stdout.txt", "capture_stderr.txt", "setup_diff_stat.txt")


def _reuse_capture_logs(at: Attempt, hold: CacheHold) -> None:
    """A cache hit runs neither setup nor the capture commands: what they recorded about this
    environment when it was built (pip freeze, the clean diff stat) is copied from the entry."""
    for name in CAPTURE_LOGS:
        saved = hold.path / "logs" / name
        if saved.is_file():
            target = at.paths.log(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(saved.read_bytes())


def _run_setup_commands(at: Attempt, sandbox: Sandbox, commands: list[str]) -> None:
    """The setup commands, sharing `setup_timeout_sec` between them."""
    budget_end = time.monotonic() + at.spec.environment.setup_timeout_sec
    for command in commands:
        result = at.run_command(sandbox, "setup", command, budget_end - time.monotonic())
        if result.disk_limit_exceeded:
            raise at.over_disk_limit(command)
        if not result.ok:
            at.found.setup.ok = False
            tail, log = failure_tail(result, at.cfg.redact), at.paths.log(SETUP_TAIL_LOG)
            if tail:
                log.write_text(tail, "utf-8")
            else:  # never a tail an earlier, killed try of this attempt left
                log.unlink(missing_ok=True)
            sub = "SETUP_TIMEOUT" if result.timed_out else "SETUP_COMMAND_FAILED"
            raise Failure(
                Reason.SETUP_FAILED, f"setup command exited {result.exit_code}: {command}", sub
            )


SETUP_TAIL_LOG = "setup_failed_tail.txt"  # the failed setup command's last lines
TAIL_LINES, TAIL_LINE_CHARS, TAIL_SCAN_CHARS = 15, 300, 64_000


def failure_tail(result: ExecResult, redact: Callable[[str], str]) -> str:
    """The last TAIL_LINES lines of a failed command's stderr (its stdout when stderr is
    empty), redacted before they are cut (a secret is never split by the cut), each line cut
    to TAIL_LINE_CHARS: what the pytest ERROR text shows of a failed setup command."""
    stream = "stderr" if result.stderr.strip() else "stdout"
    text = getattr(result, stream)
    if not text.strip():
        return ""
    scanned = redact(text[-TAIL_SCAN_CHARS:])
    lines = scanned.rstrip("\n").splitlines()
    if len(text) > TAIL_SCAN_CHARS:
        lines = lines[1:]  # the first may be a fragment
    kept = [
        line if len(line) <= TAIL_LINE_CHARS else line[:TAIL_LINE_CHARS] + " [...]"
        for line in lines[-TAIL_LINES:]
    ]
    header = f"  last {len(kept)} lines of its {stream}:"
    return "\n".join([header, *(f"    {line}" for line in kept)]) + "\n"


def _env_cache_key(at: Attempt) -> str:
    spec, cfg = at.spec, at.cfg
    key = cache_key(
        spec,
        commit=at.found.commit,
        image=spec.environment.docker_image or cfg.shared.image_id or cfg.shared.image,
        engine=type(at.sandboxes).__name__,
        pip_cache=pip_cache_dir(cfg.shared.pip_cache, spec).name if cfg.shared.pip_cache else None,
    )
    cache = at.cfg.shared.env_cache
    at.environment["env_cache"] = {"key": key, "root": str(cache.root) if cache else None}
    return key


def _save_env_snapshot(at: Attempt, setup_sec: float) -> str:
    """Publish what this clean setup left (the workspace with its ignored files, and /env)
    under the attempt's key; from now on this attempt uses the entry too (its pristine copy).
    Returns the `setup.env_cache` verdict."""
    cache, claim, key = at.cfg.shared.env_cache, at.cache_claim, at.cache_key
    assert cache is not None and key is not None
    info = at.environment["env_cache"]
    if claim is None or not claim.building:
        info["not_saved"] = "another worker was building this environment (the wait timed out)"
        return "not_saved"
    started = time.monotonic()
    logs = [at.paths.log(name) for name in CAPTURE_LOGS]
    hold, why_not = cache.publish(
        claim, key, at.workspace / "repo", at.env_dir, [p for p in logs if p.is_file()],
        {"task": at.spec.id, "suite": at.spec.suite, "commit": at.found.commit,
         "setup_sec": round(setup_sec, 3)},
    )
    info["save_sec"] = round(time.monotonic() - started, 3)
    if hold is None:
        info["not_saved"] = why_not
        return "not_saved"
    at.cache_hold = hold
    return "built"


def baseline(at: Attempt, sandbox: Sandbox) -> None:
    """The failing command before the agent: it must fail as the task says (core/baseline.py),
    and what pytest reports then is the reference for scoring (core/evidence.py). A task with
    hidden tests runs it in a sandbox of its own on a throwaway copy with them applied, so the
    agent's sandbox and workspace never hold a trace of them (core/hidden_tests.py)."""
    validation = at.spec.validation
    started = time.monotonic()
    hidden = hidden_tests.load(at)
    if hidden is None:
        results = _failing_runs(at, sandbox)
    else:
        with hidden_tests.baseline_sandbox(at, hidden) as copy:
            results = _failing_runs(at, copy, forget=True)
    seconds = round(time.monotonic() - started, 3)
    for result in results:
        if result.disk_limit_exceeded:
            raise at.over_disk_limit(validation.failing_command)
    at.baseline_output = results[0]
    at.found.baseline, verdict = baseline_mod.evaluate(validation, results, at.baseline_results)
    at.found.baseline.duration_sec = seconds
    if verdict.reason is not None:
        raise Failure(verdict.reason, verdict.summary, verdict.sub_reason)
    if validation.results == "junit" and at.baseline_results is None:
        raise Failure(  # else every attempt would fail RESULTS_MISSING, blamed on the agent
            Reason.SETUP_FAILED,
            "validation.results is junit, but failing_command left no pytest results "
            "(does it run pytest, without its own --junitxml or PYTEST_ADDOPTS?)",
            "RESULTS_MISSING",
        )


def _failing_runs(at: Attempt, sandbox: Sandbox, forget: bool = False) -> list[ExecResult]:
    """The failing command `baseline_runs` times; the first run's pytest results kept (and,
    with `forget`, their file removed: a copy's sandbox, not the agent's). In the agent's
    sandbox the runs also start the agent's snapshots (`at.snapshots`)."""
    validation = at.spec.validation
    results = []
    runs = validation.baseline_runs
    # In the agent's sandbox the agent's snapshots start after the first run and take the base
    # tree after the last, in those runs' own execs (as the agent will find the workspace:
    # nothing runs in it in between); with one run, it only starts them.
    snapshots = None if forget or not getattr(sandbox, "runs_epilogues", False) \
        else Snapshotter(sandbox)
    for i in range(runs):
        path, env = at.results_env()
        epilogue, snapshot_env = "", dict[str, str]()
        if snapshots is not None and (i == 0 or i == runs - 1):
            first = snapshots.first_script() if i > 0 else None
            epilogue, snapshot_env = first if first is not None else (START_SCRIPT, {})
        results.append(at.run_command(
            sandbox,
            "baseline",
            validation.failing_command,
            at.spec.environment.tool_timeout_sec,
            log="failing" if i == 0 else f"failing_run{i + 1}",
            env={**env, **snapshot_env},  # the wrapper hides snapshot_env from the command
            results_path=path if i == 0 else "",
            epilogue=epilogue,
        ))
        if snapshots is not None and epilogue == START_SCRIPT:
            snapshots.started = results[-1].epilogue_output
        elif snapshots is not None and epilogue:
            snapshots.accept_first(results[-1].epilogue_output)
        if i == 0:
            at.baseline_results, _ = at.collect_results(sandbox, path, results[0])
        if forget:
            hidden_tests.forget_results(sandbox, path)
    at.snapshots = snapshots
    return results


def dirty_tracked_files(sandbox: Sandbox, timeout_sec: float = 60) -> tuple[list[str], str]:
    """Tracked files changed since checkout, and `git diff --stat` (setup must leave none)."""
    result = sandbox.exec(
        f"{GIT} status --porcelain --untracked-files=no && echo '@@stat@@' && "
        f"{GIT} diff --stat HEAD",
        timeout_sec=timeout_sec,
    )
    if not result.ok:
        raise SandboxError(f"git status failed: {result.stderr.strip()[-300:]}")
    status, _, stat = result.stdout.partition("@@stat@@\n")
    files = sorted(line[3:] for line in status.splitlines() if line.strip())
    return files, stat.strip()
