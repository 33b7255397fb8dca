"""A content-keyed cache of post-setup states, so a re-run skips its setup.

An entry is what one clean setup left: the whole workspace (`repo/`, the checkout with every
ignored file setup wrote: a `.venv`, `*.egg-info`, build outputs) and the env dir (`env/`,
mounted at /env). The key covers everything that shapes that state or decides whether its setup
may run at all (`cache_key`): every task field that does (KEYED_TASK_FIELDS: the setup and
capture commands, which run in the same writable sandbox, the repository, the image, the
workdir, the network policy, the limits and timeouts setup runs under, the redaction its logs
got), the resolved commit and image, the sandbox engine, the task's own pip cache and the
layout version; never the run id. Every other task field is named in SETUP_IRRELEVANT with
why, and a test fails when a field is in neither, so none is left out silently (a
task that copied another's setup and added a capture command published the other's
key with a planted file; one with a 2 GiB disk limit built what a 32 MiB one was served).
Entries never change once published, and hold no setuid or setgid bit (any local user could
otherwise run a file as the sandbox's uid): an attempt gets a copy-on-write view (mounted
nosuid,nodev) or a copy of `repo/` and a read-only mount (or a copy) of `env/`
(SandboxFactory.provision_from), so nothing an agent does reaches the next attempt.

Concurrency, with flock(2) on files under `.locks/` (released by the kernel when a process
dies, so a crashed worker never wedges the others):
- `<key>.use`, shared, held by every attempt that uses the entry: `prune` removes only what it
  can lock exclusively, so an entry is never removed under an attempt (an overlay's lower layer).
- `<key>.build`, exclusive, held by the one worker that runs the setup of a missing key; another
  worker that misses the same key waits for it (`claim`), then uses what it published.

Eviction: least recently used first, down to `max_bytes` (sizes measured at publish time).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentbench.paths.trees import copy_tree, strip_setid, tree_size
from pytest_agentbench.schemas.task import TaskSpec

LAYOUT_VERSION = 3  # 3: the key covers capture commands, limits and the rest
META = "meta.json"
USED = "last_used"
CLAIM_POLL_SEC = 0.25
STALE_TMP_SEC = 6 * 3600  # a half-written entry this old belongs to a dead build


# The task fields (TaskSpec, by dotted path) that shape what a setup leaves or decide whether it
# may run: each is in the key. tests/unit/test_env_cache_key.py walks the schema and fails when
# a field is neither here nor in SETUP_IRRELEVANT, and when changing a keyed one keeps the key.
KEYED_TASK_FIELDS = (
    "repo.url",  # the source; the resolved commit is keyed too
    "repo.commit",
    "environment.docker_image",  # as written; the resolved image is keyed too
    "environment.python",
    "environment.workdir",  # where the workspace is mounted: paths a venv or build bakes in
    "environment.network_policy",  # whether setup could download anything
    "environment.cpu_limit",  # the limits the setup sandbox ran under: a setup that fails
    "environment.mem_limit_mb",  # under one task's limits must not be served what it built
    "environment.pids_limit",  # under another's
    "environment.disk_limit_mb",
    "environment.setup_timeout_sec",  # the setup commands' shared budget
    "environment.tool_timeout_sec",  # each capture command's budget
    "setup.commands",
    "setup.capture",  # capture commands run in the same writable sandbox as setup
    "artifacts.redact",  # the entry keeps the capture logs, redacted when they were written
)
SETUP_IRRELEVANT = {
    "task_spec_version": "the schema's version: a new one is a new model, walked again",
    "id": "a name: setup never sees it (the task's own pip cache is keyed separately)",
    "suite": "a name, as id",
    "harness_min_version": "decides only whether the task loads",
    "description": "text for people",
    "labels": "selection and reporting",
    "quarantine": "selection and reporting",
    "environment.timeout_sec": "the agent's time; it lengthens the setup sandbox's lifetime, "
    "which always exceeds setup's own budget",
    "validation.failing_command": "baseline and scoring, after setup, never cached",
    "validation.passing_command": "scoring",
    "validation.expected_exit_codes": "baseline verdict",
    "validation.expected_failure_regex": "baseline verdict",
    "validation.disallowed_failure_regex": "baseline verdict",
    "validation.expected_failing_tests": "baseline verdict",
    "validation.baseline_runs": "baseline, after setup (and the sandbox lifetime, as timeout_sec)",
    "validation.results": "scoring evidence",
    "validation.hidden_tests": "applied after setup, to copies the cache never holds",
    "agent.entrypoint": "the agent runs after setup, in a sandbox of its own",
    "agent.max_steps": "the agent",
    "agent.allow_file_write": "the agent's tools",
    "agent.editable_globs": "the agent's tools",
    "agent.readonly_globs": "the agent's tools",
    "agent.max_changed_files": "the agent's edit policy",
    "agent.max_lines_changed": "the agent's edit policy",
    "agent.forbidden_commands": "the agent's tools",
    "agent.protect_test_infra": "the agent's tools and scoring",
    "artifacts.keep_workspace": "what is kept after the attempt",
    "oracle.patch": "the reference fix, applied by the oracle agent after setup",
}


def cache_key(spec: TaskSpec, *, commit: str, image: str, engine: str,
              pip_cache: str | None = None) -> str:
    """The env-cache key of `spec`'s setup: the KEYED_TASK_FIELDS, the resolved `commit` and
    `image` (id when known), the sandbox `engine` that runs setup (a local sandbox's entry holds
    host paths and ran under no limits), the task's own pip cache (`pip_cache`, a name: what an
    earlier setup of that task left there can shape what pip installs) and the layout."""
    fields = spec.model_dump(mode="json")
    keyed = {path: _field(fields, path) for path in KEYED_TASK_FIELDS}
    blob = json.dumps(
        {"task": keyed, "commit": commit, "image": image, "engine": engine,
         "pip_cache": pip_cache, "layout": LAYOUT_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _field(fields: dict[str, Any], path: str) -> Any:
    value: Any = fields
    for part in path.split("."):
        value = value[part]  # a KeyError is a stale name here: the key test catches it
    return value


class _Lock:
    """An flock on one file; `close()` releases it (so does the process's death)."""

    def __init__(self, path: Path, exclusive: bool, blocking: bool) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        flags = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if blocking else fcntl.LOCK_NB)
        try:
            fcntl.flock(self.fd, flags)
        except OSError:
            os.close(self.fd)
            self.fd = None
            raise

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _try_lock(path: Path, exclusive: bool) -> _Lock | None:
    try:
        return _Lock(path, exclusive, blocking=False)
    except BlockingIOError:
        return None


@dataclass
class CacheHold:
    """A published entry, held against eviction until `close()`."""

    key: str
    path: Path
    meta: dict[str, Any]
    _lock: _Lock

    @property
    def repo(self) -> Path:
        return self.path / "repo"

    @property
    def env(self) -> Path:
        return self.path / "env"

    def close(self) -> None:
        self._lock.close()


@dataclass
class Claim:
    """What `claim` got: an entry another worker published meanwhile (`hold`), or the right to
    build it (`building`), or neither (the wait timed out: run setup, cache nothing)."""

    hold: CacheHold | None = None
    build_lock: _Lock | None = None
    waited_sec: float = 0.0

    @property
    def building(self) -> bool:
        return self.build_lock is not None

    def release(self) -> None:
        if self.build_lock is not None:
            self.build_lock.close()
            self.build_lock = None


@dataclass(frozen=True)
class EntryInfo:
    key: str
    bytes: int
    files: int
    created: float
    last_used: float
    in_use: bool
    meta: dict[str, Any]


class EnvCache:
    def __init__(self, root: Path, max_bytes: int | None = None) -> None:
        self.root = root
        self.max_bytes = max_bytes

    # -- using an entry ---------------------------------------------------------------------------
    def open(self, key: str) -> CacheHold | None:
        """The complete entry for `key`, held; None when there is none."""
        lock = _Lock(self._lock_path(key, "use"), exclusive=False, blocking=True)
        entry = self.root / key
        try:
            meta = json.loads((entry / META).read_text("utf-8"))
        except (OSError, ValueError):
            lock.close()
            return None
        with contextlib.suppress(OSError):
            (entry / USED).touch()
        return CacheHold(key, entry, meta, lock)

    def claim(self, key: str, wait_sec: float) -> Claim:
        """After a miss: build `key` (the exclusive build lock), or wait up to `wait_sec` while
        another worker builds it and hold what it published."""
        started = time.monotonic()
        while True:
            lock = _try_lock(self._lock_path(key, "build"), exclusive=True)
            hold = self.open(key)
            waited = round(time.monotonic() - started, 3)
            if hold is not None:
                if lock is not None:
                    lock.close()
                return Claim(hold=hold, waited_sec=waited)
            if lock is not None:
                return Claim(build_lock=lock, waited_sec=waited)
            if waited >= wait_sec:
                return Claim(waited_sec=waited)
            time.sleep(CLAIM_POLL_SEC)

    def publish(self, claim: Claim, key: str, repo: Path, env: Path, logs: list[Path],
                meta: dict[str, Any]) -> tuple[CacheHold | None, str | None]:
        """Copy a clean post-setup state into the cache under `key` (the caller builds it:
        `claim.building`), with the `logs` that describe it (under `logs/`), then evict down
        to the cap. Returns the entry, held, or why not."""
        if not claim.building:
            return None, "another worker was building this environment"
        final = self.root / key
        tmp = self.root / f".tmp-{key}-{uuid.uuid4().hex[:8]}"
        try:
            tmp.mkdir(parents=True)
            copy_tree(repo, tmp / "repo")
            copy_tree(env, tmp / "env")
            strip_setid(tmp)  # nothing in an entry runs as whoever made it
            (tmp / "logs").mkdir()
            for log in logs:
                (tmp / "logs" / log.name).write_bytes(log.read_bytes())
            size, files = tree_size(tmp)
            if self.max_bytes is not None and size > self.max_bytes:
                return None, f"the environment ({size >> 20} MiB) is larger than the cache cap"
            meta = {**meta, "key": key, "bytes": size, "files": files, "created": time.time(),
                    "layout": LAYOUT_VERSION}
            (tmp / META).write_text(json.dumps(meta, sort_keys=True), "utf-8")
            (tmp / USED).touch()
            os.rename(tmp, final)
        except OSError as exc:
            return None, f"cannot save the environment: {exc}"
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        hold = self.open(key)
        claim.release()
        self.prune()
        return hold, None if hold is not None else "the entry vanished right after publishing"

    # -- listing and eviction ---------------------------------------------------------------------
    def entries(self) -> list[EntryInfo]:
        found = []
        for entry in sorted(self.root.iterdir()) if self.root.is_dir() else []:
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            try:
                meta = json.loads((entry / META).read_text("utf-8"))
                used = (entry / USED).stat().st_mtime
            except (OSError, ValueError):
                continue
            probe = _try_lock(self._lock_path(entry.name, "use"), exclusive=True)
            if probe is not None:
                probe.close()
            found.append(EntryInfo(entry.name, int(meta.get("bytes", 0)), int(meta.get("files", 0)),
                                   float(meta.get("created", 0)), used, probe is None, meta))
        return found

    def footprint(self) -> tuple[int, int]:
        """(entries, bytes)."""
        entries = self.entries()
        return len(entries), sum(e.bytes for e in entries)

    def prune(self, max_bytes: int | None = None, everything: bool = False) -> list[EntryInfo]:
        """Remove least-recently-used entries (not in use) until the cache fits `max_bytes`
        (default: the cache's cap; `everything`: all of them). Returns what was removed."""
        cap = 0 if everything else (max_bytes if max_bytes is not None else self.max_bytes)
        self._remove_stale_tmp()
        if cap is None:
            return []
        entries = sorted(self.entries(), key=lambda e: e.last_used)
        total = sum(e.bytes for e in entries)
        removed = []
        for info in entries:
            if total <= cap:
                break
            if self._remove(info.key):
                total -= info.bytes
                removed.append(info)
        return removed

    def _remove(self, key: str) -> bool:
        lock = _try_lock(self._lock_path(key, "use"), exclusive=True)
        if lock is None:
            return False  # in use
        try:
            trash = self.root / f".trash-{key}-{uuid.uuid4().hex[:8]}"
            try:
                os.rename(self.root / key, trash)
            except FileNotFoundError:
                return False
        finally:
            lock.close()
        shutil.rmtree(trash, ignore_errors=True)
        return True

    def _remove_stale_tmp(self) -> None:
        now = time.time()
        for path in self.root.glob(".t*-*") if self.root.is_dir() else []:
            with contextlib.suppress(OSError):
                old = now - path.stat().st_mtime > STALE_TMP_SEC
                if path.name.startswith(".trash-") or (path.name.startswith(".tmp-") and old):
                    shutil.rmtree(path, ignore_errors=True)

    def _lock_path(self, key: str, kind: str) -> Path:
        return self.root / ".locks" / f"{key}.{kind}"
