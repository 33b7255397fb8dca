"""The bench of the adversarial diff tests (tests/adversarial/test_diff_*, issue 8 item 0).

A `Bench` is what an attempt has at the agent phase: a git checkout at a pinned commit (owned by the
sandbox user, index refreshed, as the mirror checkout leaves it), a pre-agent copy of it, a real
sandbox (local or Docker) and the RecordingToolbox the agent holds. `tree_state` reads a tree on
the host, file by file (bytes and the executable bit; a symlink's target), for a content-level
comparison with what the recorded diff says.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agentbench.core.event_sink import EventSink
from pytest_agentbench.core.gitops import APPLY_PATCH
from pytest_agentbench.core.recording import RecordingToolbox
from pytest_agentbench.core.rundir import AttemptPaths
from pytest_agentbench.paths.trees import copy_tree
from pytest_agentbench.sandbox.port import Sandbox, SandboxFactory, SandboxSpec
from pytest_agentbench.tools.toolbox import Toolbox, ToolPolicy, ToolResult
from tests.support.sandboxes import SESSION_ID, SESSION_LABEL, TEST_LABEL

JUNK_PARTS = ("__pycache__", ".pytest_cache", ".agentbench")
State = dict[str, tuple[Any, ...]]


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
    return done.stdout.decode()


def sandbox_uid(kind: str) -> int | None:
    """The uid the Docker sandbox runs as when the harness is root (it then owns the tree)."""
    return 1000 if kind == "docker" and os.geteuid() == 0 else None


def make_checkout(root: Path, files: dict[str, bytes | str], kind: str) -> Path:
    """A repository at one commit, as repos/workspace.py leaves a checkout: world-writable,
    owned by the sandbox user, index refreshed after the chown."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    os.chmod(repo, 0o777)
    git(repo, "init", "-q", "--template=")
    for name, content in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    git(repo, "add", "-A", "-f")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    uid = sandbox_uid(kind)
    if uid is not None:
        subprocess.run(["chown", "-R", f"{uid}:{uid}", str(repo)], check=True)
    git(repo, "-c", f"safe.directory={repo}", "update-index", "-q", "--refresh")
    if uid is not None:
        os.chown(repo / ".git" / "index", uid, uid)
    return repo


class Bench:
    """A workspace, its pre-agent copy, a sandbox on it and the toolbox an agent would hold."""

    def __init__(
        self,
        kind: str,
        factory: SandboxFactory,
        root: Path,
        files: dict[str, bytes | str],
        policy: ToolPolicy | None = None,
        before_toolbox: Callable[[Bench], None] | None = None,
        image: str | None = None,
    ) -> None:
        self.kind, self.factory, self.root, self.image = kind, factory, root, image
        self.labels = {SESSION_LABEL: SESSION_ID, TEST_LABEL: uuid.uuid4().hex[:12]}
        self.repo = make_checkout(root, files, kind)
        self.pristine = root / "pristine"
        copy_tree(self.repo, self.pristine)
        self.sandbox = self.open(self.repo)
        if before_toolbox is not None:
            before_toolbox(self)
        self.paths = AttemptPaths(root / "run", "task", None)
        self.events = EventSink(self.paths.root / "events.jsonl", "run", "task", "attempt")
        self.policy = policy or ToolPolicy(tool_timeout_sec=60)
        inner = Toolbox(self.sandbox, self.policy)
        self.toolbox = RecordingToolbox(
            inner, self.sandbox, self.paths, self.events, lambda text: text,
            time.monotonic() + 3600,
        )

    def open(self, workspace: Path) -> Sandbox:
        from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE

        env_dir = self.root / f"env-{uuid.uuid4().hex[:6]}"
        env_dir.mkdir()
        uid = sandbox_uid(self.kind)
        if uid is not None:
            os.chown(env_dir, uid, uid)
        spec = SandboxSpec(image=self.image or DEFAULT_IMAGE, workspace=workspace, env_dir=env_dir,
                           cpu_limit=1.0, mem_limit_mb=1024, pids_limit=256, lifetime_sec=900,
                           labels=dict(self.labels))
        return self.factory.open(spec)

    def call(self, tool: str, **arguments: Any) -> ToolResult:
        return self.toolbox.call(tool, arguments)

    def run(self, command: str) -> ToolResult:
        result = self.call("run", command=command)
        assert result.ok, result.to_observation()
        return result

    def scored_copy(self, name: str = "scored") -> Path:
        """The final diff applied to a fresh pre-agent copy, in a sandbox of its own, the way
        scoring does (core/pipeline.py `_score`)."""
        files, _lines, patch = self.toolbox.final_diff()
        target = self.root / name
        copy_tree(self.pristine, target)
        if patch:
            (target / APPLY_PATCH).write_text(patch, "utf-8")
            sandbox = self.open(target)
            try:
                applied = sandbox.exec(apply_patch_command(), timeout_sec=120)
            finally:
                sandbox.close()
            assert applied.ok, applied.stderr[-2000:]
            (target / APPLY_PATCH).unlink()
        return target

    def close(self) -> None:
        close = getattr(self.toolbox, "close", None)
        if close is not None:
            close()
        self.sandbox.close()
        assert self.factory.sweep({TEST_LABEL: self.labels[TEST_LABEL]}) == 0


def apply_patch_command() -> str:
    """gitops.apply_command (applies with no attribute conversion), or on a tree that has no
    such thing the command core/pipeline.py used there."""
    import pytest_agentbench.core.gitops as gitops

    make = getattr(gitops, "apply_command", None)
    return make() if make else f"git apply --binary --whitespace=nowarn {APPLY_PATCH}"


def tree_state(root: Path, skip: Callable[[str], bool] = lambda rel: False) -> State:
    """Every file and symlink under `root` (`.git` and caches aside): a file is its bytes and
    whether its owner may execute it (all git records), a symlink its target."""
    found: State = {}
    for top, dirs, names in os.walk(root):
        rel_top = os.path.relpath(top, root)
        dirs[:] = [d for d in dirs if d != ".git" and d not in JUNK_PARTS]
        for name in names + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            rel = name if rel_top == "." else f"{rel_top}/{name}"
            if name == ".git" or name.endswith(".pyc") or skip(rel):
                continue
            path = os.path.join(top, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                found[rel] = ("file", Path(path).read_bytes(), bool(info.st_mode & stat.S_IXUSR))
    return found


def differences(expected: State, actual: State) -> list[str]:
    """What differs between two tree states, one line per path."""
    out = []
    for rel in sorted(set(expected) | set(actual)):
        a, b = expected.get(rel), actual.get(rel)
        if a != b:
            out.append(f"{rel!r}: recorded {_short(a)}, workspace {_short(b)}")
    return out


def changed_paths(before: State, after: State) -> set[str]:
    return {rel for rel in set(before) | set(after) if before.get(rel) != after.get(rel)}


def _short(entry: tuple[Any, ...] | None) -> str:
    if entry is None:
        return "absent"
    if entry[0] == "link":
        return f"symlink -> {entry[1]!r}"
    data: bytes = entry[1]
    return f"file {len(data)} bytes{' +x' if entry[2] else ''} {data[:40]!r}"
