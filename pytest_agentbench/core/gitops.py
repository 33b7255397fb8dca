"""Workspace snapshots and diffs, computed by git *inside* the sandbox.

Never on the host: the agent can write `.git/config` (fsmonitor, filters, pagers), and git run on
the host would execute whatever it put there. Inside the sandbox the snapshot still must not
depend on anything the agent controls, because the recorded diff is what scoring applies:

- A harness-owned git dir in the sandbox's /tmp (`Snapshotter`) with its own index, config and
  object store. The agent's `.git/config`, `.git/index` (assume-unchanged and skip-worktree
  bits, split index, untracked cache), `info/exclude`, hooks and HOME config are never read, and
  every setting that changes what git sees is pinned with `-c` besides.
- The object store is the harness's own because git neither rewrites an object that exists nor
  checks a loose object it reads: in the workspace's `.git/objects` an agent (or the code under
  test) could plant content C' under the id of C, write C, and be scored on C'. Every object in
  the harness store was written by git from a file it hashed, or imported by `index-pack`, which
  names each object by its content (the base tree's objects, from the workspace's store and the
  earlier harness store: a planted object arrives under its own id, and what needs the real one
  finds it missing and fails). Nothing else writes it: no command of the agent runs during a
  snapshot (the sandbox reaps them after each command), and anything it did to the git dir in
  between changes the fingerprint (ctimes included: no tool sets one back), which rebuilds.
- The stat cache is safe because only git writes that index, so its racy-entry check works as
  designed, and because git's whole-second comparison is not trusted alone: a file whose ctime
  (nanoseconds, and no tool can set it back) is newer than the previous snapshot's start, less
  the racy margin (git_scripts.margin_us), is always hashed again. Each snapshot first checks a
  fingerprint of the whole git dir (names, types, sizes, modes, mtimes, contents); if the agent
  touched or removed it, the index is rebuilt from the base tree and every file is hashed again.
- The same ctime rule lets a snapshot skip git altogether: when the host can say the workspace
  was tree T at time R (the last accepted snapshot's start in the sandbox's clock, less the
  margin; the host's R, or in a chain the wrapper's: git_scripts.CHAIN), and nothing
  in the workspace but .git has a ctime after R (a write, chmod, link, rename or removal
  sets the ctime of the file or its directory, and no tool sets it back), the workspace is still
  T; the git dir was not read, so its fingerprint is checked by the next snapshot that runs git.
- Ignore rules are the workspace's own as they stood before the agent started (its .gitignore
  files, translated into one exclude file): a .gitignore the agent adds is recorded like any file
  but hides nothing. Caches and bytecode (EXCLUDES) are never part of a snapshot.
- In-tree .gitattributes can neither convert content on the way in (info/attributes unsets text,
  eol, filter, ident, working-tree-encoding) nor make a file binary in a diff (diffs run bare).
- Diffs travel as base64, so no byte is lost; numstat (-z) and patch come from one diff
  (core/numstat.py splits them); a patch that is not valid UTF-8 is made again with every file
  as an exact binary patch. `apply_command` applies a patch the same way: no conversion,
  whatever the pre-agent copy's .gitattributes say.

A step's snapshot may run in a command's exec, before it and after it (`wrapped_scripts`, for a
sandbox that runs scripts around a command: port.EpilogueRunning): same scripts, same
guarantees, no exec of their own. The shell scripts themselves are in core/git_scripts.py; the
translation of the ignore files into one exclude file is core/gitignore_rules.py.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
import shlex
import time
from dataclasses import dataclass

import pytest_agentbench.core.git_scripts as sh
from pytest_agentbench.core.gitignore_rules import base_excludes
from pytest_agentbench.core.numstat import parse_numstat_z, split_numstat
from pytest_agentbench.sandbox.port import ExecResult, Sandbox, SandboxError

APPLY_PATCH = ".git/agentbench-final.patch"
_CHUNK = 60_000  # bytes per environment variable (one string may not exceed 128 KiB)


def apply_command(patch_path: str = APPLY_PATCH) -> str:
    """The shell command (run in the workspace root inside a sandbox) that applies a recorded
    patch exactly as recorded: no attribute conversion, no workspace config."""
    head = (
        f"PATCH={shlex.quote(patch_path)} ATTRS={base64.b64encode(sh.ATTRIBUTES).decode()}\n"
    )
    return head + sh.PRELUDE + sh.APPLY_SCRIPT


# What a Snapshotter's start runs: the workspace's ignore files, and a new harness git dir.
START_SCRIPT = sh.PRELUDE + sh.IGNORE_FILES


class SnapshotError(SandboxError):
    """git could not read the workspace (e.g. the agent made files unreadable)."""


@dataclass(frozen=True)
class DiffStat:
    patch: str
    files: list[str]
    lines_changed: int


class Snapshotter:
    """Tree ids of one sandbox's workspace, from a harness-owned index that only git writes.

    The first snapshot hashes every file and fixes the ignore rules; later ones hash only what
    git's stat check (racy entries included) cannot rule out. `rebuilds` counts the snapshots
    that found the git dir touched or gone and started again from the base tree.
    """

    def __init__(self, sandbox: Sandbox, timeout_sec: float = 60,
                 started: str | None = None) -> None:
        self.sandbox, self.timeout_sec = sandbox, timeout_sec
        self.started = started  # START_SCRIPT's output, run by the caller in this sandbox
        self.gitdir: str | None = None
        self.base = ""  # the first tree; a rebuild starts from it
        self.excludes = b""
        self.fingerprint = ""
        self.rebuilds = 0
        self.removed = False  # the git dir is gone on purpose (close, or a last snapshot)
        self.tree = ""  # the last snapshot's tree ...
        self.ref = ""  # ... and its start less the racy margin, in the sandbox's clock
        self.unchanged = 0  # snapshots that found nothing changed since $REF (ran no git)
        self.ref_offset = 0.0  # wall clock minus monotonic clock when $REF was taken
        self.shortcut_off = False  # the shortcut's find was too slow here (a large tree)
        # the host changed the workspace since the last snapshot (an edit tool): the next one
        # would find a change, so it does not look for one first
        self.host_changed = False
        self.margin_us = sh.RACY_MARGIN_SEC * 10**6  # the racy margin (git_scripts.margin_us)

    def snapshot(self) -> str:
        """The tree id of the workspace now."""
        return self._snapshot("")[0]

    def snapshot_diff(self, old: str, last: bool = False) -> tuple[str, DiffStat]:
        """The tree id of the workspace now, and the diff from tree `old` to it (one exec).
        `last`: the git dir is removed in the same exec (as `close`)."""
        _check_tree(old)
        tree, raw = self._snapshot(old, last)
        return tree, _diffstat(old, tree, raw)

    def close(self) -> None:
        """Remove the git dir (the local sandbox's /tmp is the host's); best effort. A later
        snapshot rebuilds it from the base tree."""
        if self.gitdir is not None and not self.removed:
            self.fingerprint, self.removed = "", True
            with contextlib.suppress(SandboxError):
                self.sandbox.exec(f"rm -rf {shlex.quote(self.gitdir)}", timeout_sec=30)

    def _snapshot(self, old: str, last: bool = False) -> tuple[str, tuple[bytes, bytes]]:
        end = ("LAST=1\n" + sh.SNAPSHOT_DIFF + 'rm -rf "$GD"\n') if last else sh.SNAPSHOT_DIFF
        ref = self._ref(old, last)
        self.removed = False
        if self.gitdir is None:
            self._start()
            result = self._exec(sh.UNCHANGED + sh.REBUILD_SCRIPT + sh.UPDATE + end, old)
        else:
            result = self._exec(sh.UNCHANGED + sh.CHECK + sh.UPDATE + end, old, ref)
            if result.exit_code == sh.REBUILD_EXIT and not result.timed_out:
                self.rebuilds += 1
                result = self._exec(sh.UNCHANGED + sh.REBUILD_SCRIPT + sh.UPDATE + end, old)
        accepted = self._accept(result)
        if last:
            self.fingerprint, self.removed = "", True
        return accepted

    # -- the first snapshot taken by the caller, after a command of its own (the baseline's) ----
    def first_script(self) -> tuple[str, dict[str, str]] | None:
        """The first snapshot's script and environment, for a caller that runs it after a
        command in the same exec (port.EpilogueRunning), once START_SCRIPT's output was handed
        over (`started`); None when it was not, or is not whole (the first `snapshot` then
        starts and snapshots in execs of its own)."""
        if self.gitdir is None and not self._take_started():
            return None
        head, env = self._head("")
        del env["EXPECT"]  # a first snapshot checks no fingerprint
        return (head + sh.PRELUDE + sh.FP + sh.UNCHANGED + sh.REBUILD_SCRIPT + sh.UPDATE
                + sh.SNAPSHOT_DIFF), env

    def accept_first(self, output: str | None) -> bool:
        """Take `first_script`'s output (None: it did not run to the end) as the first snapshot;
        False when it is not one: the git dir is forgotten and the first `snapshot` starts
        again in execs of its own."""
        if output is not None and self.gitdir is not None:
            with contextlib.suppress(SnapshotError):
                self._accept_text(output, ok=True, detail="(after the baseline)")
                return True
        self.gitdir, self.base, self.tree = None, "", ""
        return False

    def _take_started(self) -> bool:
        """The ignore rules and git dir from START_SCRIPT's output handed over, if it is whole."""
        lines = (self.started or "").split("\n")
        self.started = None
        if len(lines) != 4 or not lines[1].startswith(sh.GITDIR_PREFIX) or lines[3]:
            return False
        try:
            fields = _b64(lines[0]).split(b"\0")
            sources = {fields[i]: _b64(fields[i + 1].decode())
                       for i in range(0, len(fields) - 1, 2)}
        except (SnapshotError, UnicodeDecodeError):
            return False
        self.excludes = base_excludes(sources)
        self.gitdir = lines[1]
        # the fine margin only where the host checks the sandbox kernel's clock (no remote engine)
        if getattr(self.sandbox, "sees_host_files", True):
            self.margin_us = sh.margin_us(lines[2])
        return True

    def _start(self) -> None:
        """The ignore rules and a new git dir: from START_SCRIPT's output when the caller ran it
        (after the last command before the agent: one exec fewer) and it is whole, else from an
        exec of its own."""
        if self._take_started():
            return
        for _ in range(2):  # a lost output (ExecResult.output_lost): the script is repeatable
            result = self.sandbox.exec(START_SCRIPT, timeout_sec=self.timeout_sec,
                                       full_output=True)
            if not result.output_lost:
                break
        text = result.full_stdout if result.full_stdout is not None else result.stdout
        self.started = text
        if not result.ok or not self._take_started():
            raise SnapshotError(
                f"cannot start a snapshot (exit {result.exit_code}, timed out "
                f"{result.timed_out}, {len(text.splitlines())} lines): "
                f"{result.stderr.strip()[-300:]}"
            )

    def _ref(self, old: str, last: bool) -> str:
        """$REF for a snapshot from `old`: only when `old` is the last snapshot's tree and the git
        dir is as that snapshot left it (not for the last snapshot, which removes it)."""
        usable = (old == self.tree and bool(self.fingerprint) and not self.removed and not last
                  and not self.shortcut_off and not self.host_changed
                  # $REF and every ctime are wall-clock times: a clock stepped back since $REF
                  # was taken would date a later edit before it (the host and a local sandbox
                  # share the kernel's clock)
                  and abs(_clock_offset() - self.ref_offset) <= self._clock_step())
        return self.ref if usable else ""

    def _exec(self, script: str, old: str, ref: str = "") -> ExecResult:
        head, env = self._head(old, ref)
        for _ in range(2):  # a lost output (ExecResult.output_lost): snapshots are repeatable
            result = self.sandbox.exec(
                head + sh.PRELUDE + sh.FP + script, timeout_sec=self.timeout_sec, env=env,
                full_output=True,
            )
            if not result.output_lost:
                break
        return result

    def _head(self, old: str, ref: str = "") -> tuple[str, dict[str, str]]:
        """The variables every snapshot script starts with, and its environment."""
        assert self.gitdir is not None
        excl = base64.b64encode(self.excludes).decode()
        env = {
            f"AGENTBENCH_EXCL_{i // _CHUNK:05d}": excl[i : i + _CHUNK]
            for i in range(0, len(excl), _CHUNK)
        }
        env["EXPECT"] = self.fingerprint
        head = (
            f"GD={shlex.quote(self.gitdir)} BASE={shlex.quote(self.base)} OLD={old} REF={ref} LAST="
            f" ATTRS={base64.b64encode(sh.ATTRIBUTES).decode()} MARGIN_US={self.margin_us:d}\n"
        )
        return head, env

    # -- snapshots in a command's exec, around it (core/recording.py) -----------------------
    def can_fold(self) -> bool:
        """Whether a snapshot can run in a command's exec: the git dir is there, its fingerprint
        known (else the snapshot needs its own exec, and may rebuild)."""
        return self.gitdir is not None and not self.removed and bool(self.fingerprint)

    def wrapped_scripts(self, old: str, prologue: bool) -> tuple[str | None, str, dict[str, str]]:
        """For a sandbox that runs scripts around a command (port.EpilogueRunning): the pending
        step's snapshot from `old` before it (when `prologue`), the command's own after it (from
        the prologue's tree and fingerprint: git_scripts.CHAIN; else from `old`; git in a bash
        bounded by itself), and their environment. Both outputs are what `accept_fold` takes;
        the second's may say DEFER and the fingerprint instead (git_scripts.AFTER_TAIL)."""
        _check_tree(old)
        head, env = self._head(old, self._ref(old, last=False))
        head += f"EXPECT={shlex.quote(env.pop('EXPECT'))}\n"  # the command sees no EXPECT
        quick, chain = sh.PRELUDE + sh.FP + sh.UNCHANGED, sh.CHAIN.replace(
            "CHAINREF", "" if self.shortcut_off else "1")
        after = head + chain + quick + sh.bounded(sh.CHECK + sh.AFTER_BIG + sh.UPDATE
                                                  + sh.AFTER_TAIL)
        before = head + quick + sh.CHECK + sh.UPDATE + sh.SNAPSHOT_DIFF
        return before if prologue else None, after, env

    @staticmethod
    def clock_mark() -> float:  # the wall clock's offset from the monotonic one (clock_moved)
        return _clock_offset()

    def clock_moved(self, mark: float) -> bool:
        """Whether the wall clock stepped since `clock_mark` gave `mark` (a $REF taken since may
        date a later edit before it): then the shortcut is off until a snapshot runs git."""
        if moved := abs(_clock_offset() - mark) > self._clock_step():
            self.ref = ""
        return moved

    def _clock_step(self) -> float:  # the wall-clock step that voids $REF: < half the margin
        return min(CLOCK_STEP_SEC, self.margin_us / 2e6)

    def accept_fold(self, old: str, block: str) -> tuple[str, DiffStat]:
        """The tree and diff from a folded snapshot's block (what `snapshot_diff(old)` returns);
        SnapshotError if the block is not a whole snapshot."""
        self.removed = False
        tree, raw = self._accept_text(block, ok=True, detail="(the folded snapshot is incomplete)")
        return tree, _diffstat(old, tree, raw)

    def _accept(self, result: ExecResult) -> tuple[str, tuple[bytes, bytes]]:
        text = result.full_stdout if result.full_stdout is not None else result.stdout
        what = "a nested git repository" if result.exit_code == sh.NESTED_REPO_EXIT else "git"
        detail = result.stderr.strip()[-300:] or "the diff is too large to record"
        return self._accept_text(text, result.ok, f"({what}): {detail}")

    def _accept_text(self, text: str, ok: bool, detail: str) -> tuple[str, tuple[bytes, bytes]]:
        lines = text.split("\n", 4)
        fingerprint = lines[4].rstrip("\n") if len(lines) == 5 else ""
        same = fingerprint == "SAME"  # $REF held: the tree is the last one, git dir untouched
        if (not ok or len(lines) != 5 or not _is_tree(lines[0]) or lines[3].split(" ")[0] != "END"
                or not fingerprint.strip() or (same and (lines[0] != self.tree
                                                         or not self.fingerprint))):
            self.fingerprint = self.ref = ""  # whatever git left behind is rebuilt next time
            raise SnapshotError(f"git snapshot failed {detail}")
        try:  # the diff first: nothing of a snapshot whose diff is not whole is taken
            raw = split_numstat(_b64(lines[1])) if lines[1] else (b"", b"")
        except (SnapshotError, ValueError) as exc:
            self.fingerprint = self.ref = ""
            raise SnapshotError(f"git output is incomplete ({exc})") from exc
        tree, self.host_changed = lines[0], False
        if not same:
            self.fingerprint = fingerprint
        self.unchanged += same
        end = lines[3].split(" ")
        self.shortcut_off = self.shortcut_off or "SLOW" in end[2:]
        self.tree, self.ref = tree, _ref_time(end[1] if len(end) > 1 else "", self.margin_us)
        self.ref_offset = _clock_offset()
        self.base = self.base or tree
        return tree, raw


def _diffstat(old: str, new: str, raw: tuple[bytes, bytes]) -> DiffStat:
    if old == new:
        return DiffStat("", [], 0)
    patch_bytes, numstat = raw
    try:
        patch = patch_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:  # left: a symlink target that is not UTF-8
        raise SnapshotError(
            "a symlink's target is not valid UTF-8, so the change cannot be recorded"
        ) from exc
    files, lines = parse_numstat_z(numstat)
    return DiffStat(patch, files, lines)


CLOCK_STEP_SEC = 0.5  # a wall-clock step larger than this since $REF voids the shortcut


def _clock_offset() -> float:
    return time.time() - time.monotonic()


def _ref_time(started: str, margin_us: int) -> str:
    """$REF from a snapshot's start ($EPOCHREALTIME, in any locale): the racy margin earlier, as
    find's -newerct wants it; "" (no shortcut next time) when it is not such a time."""
    found = re.fullmatch(r"(\d+)[.,](\d{6})", started)
    if found is None:
        return ""
    micros = int(found[1]) * 10**6 + int(found[2]) - margin_us
    return f"{micros // 10**6}.{micros % 10**6:06d}"


def _is_tree(text: str) -> bool:
    return re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", text) is not None


def _check_tree(text: str) -> None:
    if not _is_tree(text):
        raise SnapshotError(f"not a tree id: {text!r}")


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SnapshotError(f"git output is incomplete ({exc})") from exc
