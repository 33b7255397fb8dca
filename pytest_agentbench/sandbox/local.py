"""An unisolated sandbox: commands run as host subprocesses in the workspace directory.

For fast tests of the core and for machines without Docker; never the default. The harness's
scripts around a command (port.EpilogueRunning) run as subprocesses of their own
(sandbox/local_scripts.py), with the Docker wrapper's protocol. Nothing is
enforced but the time budget: no network isolation, no resource or disk limits, same user as the
harness, and a process that leaves the command's session (setsid) outlives it. The exit status
is bash's own (waitpid), never read from the output; one command runs at a time.
The output capture and environment defaults it shares with the Docker sandbox are in `capture`.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from pytest_agentbench.paths.files import Files
from pytest_agentbench.paths.host_files import HostFiles
from pytest_agentbench.paths.trees import copy_tree
from pytest_agentbench.sandbox import local_scripts as scripts
from pytest_agentbench.sandbox.capture import (
    CAPTURE_CAP,
    DETERMINISTIC_ENV,
    FACTS_SCRIPT,
    FULL_CAPTURE_CAP,
    KILL_GRACE_SEC,
    OutputBuffer,
    build_result,
    parse_facts,
    redact_env,
)
from pytest_agentbench.sandbox.port import ExecResult, SandboxError, SandboxSpec


def pump(stream: IO[bytes], sink: OutputBuffer) -> None:
    for chunk in iter(lambda: stream.read1(65536), b""):  # type: ignore[attr-defined]
        sink.append(chunk)


def start_threads(targets: Iterable[Callable[[], None]]) -> list[threading.Thread]:
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    return threads


class LocalSandbox:
    """Runs each command as `bash -c` in its own process group under the workspace."""

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.files: Files = HostFiles(spec.workspace, owner_uid=None)
        self.closed = False
        self._facts: dict[str, str] | None = None
        self._lock = threading.Lock()  # one command at a time, as the Sandbox port says
        spec.env_dir.mkdir(parents=True, exist_ok=True)

    def environment(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env_bin = self.spec.env_dir / "bin"
        env = {
            "PATH": f"{env_bin}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
            "HOME": os.environ.get("HOME", str(self.spec.workspace)),
            "PYTHONUSERBASE": str(self.spec.env_dir), **DETERMINISTIC_ENV,
        }
        if self.spec.ca_bundle is not None:
            ca = str(self.spec.ca_bundle)
            env.update(SSL_CERT_FILE=ca, REQUESTS_CA_BUNDLE=ca, PIP_CERT=ca, GIT_SSL_CAINFO=ca)
        env.update({m.env: str(m.host) for m in self.spec.extra_mounts})  # no mounts here
        return {**env, **self.spec.env, **(extra or {})}

    def host_cwd(self, cwd: str | None) -> Path:
        if cwd is None:
            return self.spec.workspace
        workdir = self.spec.workdir.rstrip("/")
        if cwd == workdir or cwd.startswith(workdir + "/"):
            cwd = cwd[len(workdir):].lstrip("/") or "."
        return self.spec.workspace / cwd

    def exec(
        self, command: str, *, timeout_sec: float, env: Mapping[str, str] | None = None,
        cwd: str | None = None, full_output: bool = False, collect_file: str | None = None,
        epilogue: str | None = None, prologue: str | None = None, inline_scripts: bool = False,
    ) -> ExecResult:
        """`collect_file`, `epilogue`, `prologue`: port.EpilogueRunning, as host subprocesses
        of their own (sandbox/local_scripts.py); `inline_scripts`: each bounded by the command's
        budget and SCRIPT_MAX_SEC together rather than by SCRIPT_MAX_SEC alone."""
        with self._lock:
            return self._exec(command, timeout_sec, env, cwd, full_output, collect_file,
                              epilogue, prologue, inline_scripts)

    collects_files = runs_epilogues = runs_prologues = epilogues_read = True

    def _exec(self, command: str, timeout_sec: float, env: Mapping[str, str] | None,
              cwd: str | None, full_output: bool, collect_file: str | None = None,
              epilogue: str | None = None, prologue: str | None = None,
              inline: bool = False) -> ExecResult:
        """The exit status is bash's own, from waitpid: nothing the command prints counts."""
        if self.closed:
            raise SandboxError("sandbox is closed")
        full = full_output or self.spec.full_logs
        cap = FULL_CAPTURE_CAP if full else CAPTURE_CAP
        out, err = OutputBuffer(cap), OutputBuffer(cap)
        start = time.monotonic()
        where, environment = self.host_cwd(cwd), self.environment(env)
        # inline: as the Docker exec's deadline bounds them, the budget and an allowance
        bound = timeout_sec + scripts.SCRIPT_MAX_SEC if inline else scripts.SCRIPT_MAX_SEC
        before = scripts.run_prologue(prologue, where, environment, bound) if prologue else None
        if before is not None:
            out.append(before.head.encode())
            if before.deferred:  # timed out only when cut short inline (a Docker exec overrun)
                return build_result(0, out, err, int((time.monotonic() - start) * 1000),
                                    timed_out=before.overran and inline, oom_killed=False,
                                    full_logs=full)
        chain = scripts.chain_for(before)
        try:
            proc = subprocess.Popen(
                ["bash", "-c", command], cwd=where,
                env=scripts.command_env(environment) if prologue or epilogue else environment,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise SandboxError(f"cannot start bash: {exc}") from exc
        assert proc.stdout is not None and proc.stderr is not None
        readers = start_threads([lambda: pump(proc.stdout, out),  # type: ignore[arg-type]
                                 lambda: pump(proc.stderr, err)])  # type: ignore[arg-type]
        timed_out = False
        try:
            exit_code = proc.wait(timeout=max(timeout_sec, 0.001))
        except subprocess.TimeoutExpired:
            timed_out = True
            exit_code = self._terminate(proc)
        finally:
            scripts.killpg(proc.pid, signal.SIGKILL)  # leftovers: background jobs of the command
        for reader in readers:
            reader.join(timeout=KILL_GRACE_SEC)
        after = (scripts.run_epilogue(epilogue, where, environment, chain, bound) if epilogue
                 else None)
        read, content = scripts.collect(where / collect_file) if collect_file else (False, None)
        duration_ms = int((time.monotonic() - start) * 1000)
        if exit_code < 0:
            exit_code = 128 - exit_code
        result = build_result(exit_code, out, err, duration_ms, timed_out=timed_out,
                              oom_killed=False, full_logs=full)
        return dataclasses.replace(result, epilogue_output=after, file_read=read,
                                   file_content=content)

    @staticmethod
    def _terminate(proc: subprocess.Popen[bytes]) -> int:
        """`timeout -k` semantics: TERM the group, KILL it after the grace; 124 or 137."""
        scripts.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=KILL_GRACE_SEC)
            return 124
        except subprocess.TimeoutExpired:
            scripts.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return 137

    def facts(self) -> dict[str, Any]:
        if self._facts is None:
            # FACTS_SCRIPT (`python -m pytest --version` loads every plugin: 0.3 s) once per
            # process for one environment: the same variables, and the env dir's bin and lib as
            # they are (a setup that made a venv or installed something there changes them)
            key = (tuple(sorted(self.environment(None).items())),
                   _state(self.spec.env_dir / "bin"), _state(self.spec.env_dir / "lib"))
            with _FACTS_LOCK:
                cached = _FACTS.get(key)
            if cached is None:
                cached = parse_facts(self.exec(FACTS_SCRIPT, timeout_sec=60).stdout)
                with _FACTS_LOCK:
                    _FACTS[key] = cached
            self._facts = cached
        return {
            "sandbox": "local", "isolation": "none", "host": platform.node(),
            "workdir": str(self.spec.workspace), "env": redact_env(self.spec.env),
            "enforced": {"network": False, "cpu": False, "memory": False, "pids": False},
            "os": dict(self._facts),
        }

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_FACTS: dict[Any, dict[str, str]] = {}  # environment -> OS facts, for this process
_FACTS_LOCK = threading.Lock()


def _state(path: Path) -> tuple[int, int, int] | None:
    """A directory as it is now (inode, mtime, ctime), or None if it is not there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_ctime_ns


class LocalSandboxFactory:
    """Opens LocalSandboxes; `sweep` only forgets them (there is nothing to remove)."""

    def __init__(self) -> None:
        self._open: list[LocalSandbox] = []

    def open(self, spec: SandboxSpec) -> LocalSandbox:
        if not spec.workspace.is_dir():
            raise SandboxError(f"workspace {spec.workspace} is not a directory")
        sandbox = LocalSandbox(spec)
        self._open.append(sandbox)
        return sandbox

    @staticmethod
    def provision(path: Path, disk_limit_mb: int | None) -> str:
        """Nothing is bounded here: an empty directory, "none"."""
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise SandboxError(f"cannot bound {path}: it must be an empty directory")
        path.mkdir(parents=True, exist_ok=True)
        return "none"

    def provision_from(self, path: Path, disk_limit_mb: int | None, base: Path) -> tuple[str, str]:
        """A copy of `base` (nothing here could stop a command writing through to it)."""
        mode = self.provision(path, disk_limit_mb)
        copy_tree(base, path)
        return mode, "copy"

    read_only_mounts = False  # commands run on the host: SandboxSpec.env_read_only is advisory

    @staticmethod
    def release(path: Path, keep: bool = False) -> None:
        """Nothing to undo."""

    def sweep(self, labels: Mapping[str, str]) -> int:
        matching = [s for s in self._open
                    if not s.closed and all(s.spec.labels.get(k) == v for k, v in labels.items())]
        for sandbox in matching:
            sandbox.close()
        self._open = [s for s in self._open if not s.closed]
        return len(matching)

    def close_all(self) -> None:
        for sandbox in self._open:
            sandbox.close()
        self._open.clear()
