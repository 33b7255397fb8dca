"""The toolbox the agent actually holds: every call recorded, every edit diffed.

Wraps the Toolbox so agents need no cooperation: each call goes to `agent/tool_calls.jsonl`
(redacted), a call that raises included (its exception is the result), and after any call that
may have changed files the workspace tree is compared with the last snapshot; a change becomes
`diffs/step_NNNN.patch` and a `patch_applied` event. Snapshots come from one `Snapshotter` per
sandbox (core/gitops.py), whose first tree is the base of the final diff.

The snapshot after a step is taken when it is next needed, and always before anything can change
the workspace again: at the start of the next command's exec (folded into it, one exec instead
of two: core/snapshot_fold.py), in an exec of its own before a host-side edit, before the final
diff, or at `close`. Read-only tools (they never write) do not wait for it. On a sandbox that
runs scripts around a command (port.EpilogueRunning: Docker's wrapper, the local sandbox's
subprocesses), a command's exec takes the pending step's snapshot before the command and the
command's own after it, the first's tree handed to the second by the sandbox, out of the
command's reach on Docker: no step is left pending after a `run`, so a host-side edit after one
pays no exec. A sandbox that runs no scripts takes each snapshot in an exec of its own.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from pytest_agentbench.agents.port import AgentOutcome
from pytest_agentbench.core.event_sink import EventSink
from pytest_agentbench.core.gitops import DiffStat, SnapshotError, Snapshotter
from pytest_agentbench.core.rundir import AttemptPaths
from pytest_agentbench.core.snapshot_fold import FoldingSandbox, foldable, split_fold
from pytest_agentbench.paths.globs import matches_any
from pytest_agentbench.sandbox.port import EpilogueRunning, ExecResult, Sandbox, SandboxError
from pytest_agentbench.schemas.events import Note, PatchApplied, utc_now
from pytest_agentbench.schemas.records import AgentStats
from pytest_agentbench.tools.toolbox import Toolbox, ToolResult

MUTATING = frozenset({"apply_patch", "write_file", "remove_file", "run"})
HOST_EDITS = MUTATING - {"run"}  # they write through the host: the pending snapshot comes first


class RecordingToolbox:
    def __init__(
        self,
        inner: Toolbox,
        sandbox: Sandbox,
        paths: AttemptPaths,
        events: EventSink,
        redact: Callable[[str], str],
        deadline: float,
        snapshots: Snapshotter | None = None,
    ) -> None:
        self.inner, self.sandbox, self.paths, self.events = inner, sandbox, paths, events
        self.redact, self.deadline = redact, deadline
        self.redact_obj = events.redact_obj
        self.policy = inner.policy
        self.step = 0
        self.errors = 0
        self.patches_rejected = 0
        self.hunks_recounted = 0  # applied hunks whose header counts were corrected
        self.edits_refused = 0
        # `snapshots`: started on this sandbox by the caller (the baseline runs' epilogues), its
        # first snapshot the base tree if it took one
        self.snapshots = snapshots if snapshots is not None else Snapshotter(sandbox)
        self.base_tree = self.snapshots.base or self.snapshots.snapshot()
        self.last_tree = self.base_tree
        self.pending: int | None = None  # the step whose snapshot is still to be taken
        self.taken: int | None = None  # a step whose own snapshot its command's exec took
        self.snapshot_ms = 0.0  # host time spent in step snapshots (the folded ones' own part)
        self.folded = self.deferred = 0  # step snapshots folded into a command's exec, or not
        # The tools' commands go through the fold (the toolbox runs commands only in `run`).
        inner.sandbox = FoldingSandbox(sandbox, self._exec)
        self.diff_steps = 0
        self.changed_files: list[str] = []
        self.final_patch = ""
        self.lines_changed = 0

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        self.step += 1
        # No command may outlive the task's budget.
        if name == "run" and isinstance(arguments, dict):
            remaining = max(1.0, self.deadline - time.monotonic())
            asked = arguments.get("timeout_sec") or self.policy.tool_timeout_sec
            if isinstance(asked, int | float):
                arguments = {**arguments, "timeout_sec": min(float(asked), remaining)}
        try:
            if name in HOST_EDITS:
                self._settle()
            result = self.inner.call(name, arguments)
        except BaseException as exc:  # the sandbox died (or worse): the call is still recorded
            kind = "SANDBOX_ERROR" if isinstance(exc, SandboxError) else "HARNESS_ERROR"
            self._log_call(name, arguments, {
                "ok": False, "tool": name, "error_type": kind, "exception": type(exc).__name__,
                "error_message": f"{type(exc).__name__}: {exc}"[:2000],
            })
            raise
        if result.ok and name == "apply_patch":
            self.hunks_recounted += len(result.data.get("recounted") or ())
        if not result.ok:
            self.errors += 1
            if result.error_type == "PATCH_REJECTED":
                self.patches_rejected += 1
            if result.error_type == "EDIT_NOT_ALLOWED":
                self.edits_refused += 1
        self._log_call(name, arguments, result.to_dict())
        if name in MUTATING and self.taken != self.step:
            self.pending = self.step
        if name in HOST_EDITS and result.ok:
            self.snapshots.host_changed = True
        return result

    def _log_call(self, name: str, arguments: dict[str, Any], result: dict[str, Any]) -> None:
        line = self.redact_obj({"step": self.step, "ts": utc_now(), "tool": name,
                                "arguments": arguments, "result": result})
        text = json.dumps(line, ensure_ascii=False, default=str)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates (write_file takes them): escaped instead
            data = json.dumps(line, default=str).encode("ascii")
        with (self.paths.root / "agent" / "tool_calls.jsonl").open("ab") as fh:
            fh.write(data + b"\n")

    def _settle(self) -> None:
        """Take the pending step's snapshot now, in an exec of its own."""
        if self.pending is None:
            return
        step, self.pending = self.pending, None
        rebuilds, started = self.snapshots.rebuilds, time.perf_counter()
        try:
            tree, diff = self.snapshots.snapshot_diff(self.last_tree)
        except SnapshotError as exc:  # the agent's doing; the final diff decides its fate
            self.events.emit(Note(kind="snapshot_failed", message=str(exc)[:300]))
            return
        finally:
            self.snapshot_ms += (time.perf_counter() - started) * 1000
        self._note_rebuild(rebuilds)
        self._record_step(step, tree, diff)

    def _note_rebuild(self, rebuilds: int) -> None:
        """A `snapshot_rebuilt` note when the last snapshot rebuilt the index (`rebuilds`: the
        count before it)."""
        if self.snapshots.rebuilds > rebuilds:
            self.events.emit(Note(
                kind="snapshot_rebuilt",
                message="the harness's snapshot index was changed or removed; rebuilt",
            ))

    def _exec(self, command: str, timeout_sec: float, env: Mapping[str, str] | None,
              cwd: str | None, full_output: bool) -> ExecResult:
        """A tool's command, with the pending snapshot folded in front of it when it can be,
        and its own after it when the sandbox runs scripts around a command."""
        plain = foldable(command, timeout_sec, env, cwd, full_output)
        if (plain and self.snapshots.can_fold()
                and getattr(self.sandbox, "runs_prologues", False)):
            result = self._exec_around(command, timeout_sec)
            if result is None and self.snapshots.can_fold():  # the prologue deferred; settled
                result = self._exec_around(command, timeout_sec)
            if result is not None:
                return result
        self._settle()
        return self.sandbox.exec(command, timeout_sec=timeout_sec, env=env, cwd=cwd,
                                 full_output=full_output)

    def _exec_around(self, command: str, timeout_sec: float) -> ExecResult | None:
        """`command` with the pending step's snapshot before it and its own after it, in its
        exec (port.EpilogueRunning); None when the first deferred (then the command did not run,
        and the pending snapshot was taken in an exec of its own)."""
        step, old = self.pending, self.last_tree
        sandbox = cast(EpilogueRunning, self.sandbox)
        prologue, after_script, env = self.snapshots.wrapped_scripts(old, step is not None)
        # an epilogue whose output would never come back is not run: only the prologue then
        epilogue = after_script if sandbox.epilogues_read else None
        started, clock = time.perf_counter(), self.snapshots.clock_mark()
        result = sandbox.exec(  # the snapshots' environment only with a script (else the command
            command, timeout_sec=timeout_sec,  # would see it: the wrapper hides it then alone)
            env=env if prologue or epilogue else None, prologue=prologue, epilogue=epilogue,
            inline_scripts=True)
        base: str | None = old
        if step is not None:
            folded = split_fold(result)
            if folded.result is None or folded.block is None:
                if result.output_lost:  # the command may have run: both steps wait as one
                    return result
                self.deferred += 1
                self.snapshot_ms += (time.perf_counter() - started) * 1000
                if folded.fingerprint != "SAME":
                    self.snapshots.fingerprint = folded.fingerprint or ""
                self._settle()
                return None
            self.pending, self.folded, result = None, self.folded + 1, folded.result
            self.snapshot_ms += folded.snapshot_us / 1000
            base = self._accept(step, old, folded.block)
        after = result.epilogue_output
        # after the prologue's accept, which took its start as $REF: a wall clock that stepped
        # during the exec voids it, and the after-snapshot's "unchanged", which rests on it
        if self.snapshots.clock_moved(clock) and (after or "").rstrip("\n").endswith("SAME"):
            after = None
        if after is not None and after.startswith("DEFER\n"):  # too large, or a large file
            self.snapshots.fingerprint = after[6:].rstrip("\n")
            # now, in an exec with a bound of its own, not in the next command's
            self.pending, self.taken = self.step, self.step
            self._settle()
        elif after is not None and base is not None \
                and self._accept(self.step, base, after) is not None:
            self.taken = self.step
        return result

    def _accept(self, step: int, old: str, block: str) -> str | None:
        """Record `step` from a snapshot's output (the diff from `old`); its tree, or None (a
        note) when the output is not a whole snapshot."""
        try:
            tree, diff = self.snapshots.accept_fold(old, block)
        except SnapshotError as exc:
            self.events.emit(Note(kind="snapshot_failed", message=str(exc)[:300]))
            return None
        self._record_step(step, tree, diff)
        return tree

    def _record_step(self, step: int, tree: str, diff: DiffStat) -> None:
        if tree == self.last_tree:
            return
        self.last_tree = tree
        self.diff_steps += 1
        path = self.paths.root / "diffs" / f"step_{step:04d}.patch"
        path.write_text(self.redact(diff.patch), "utf-8")
        self.events.emit(
            PatchApplied(step=step, changed_files=diff.files, diff_path=self.paths.relative(path)),
            actor="tool",
        )

    def final_diff(self) -> tuple[list[str], int, str]:
        # The pending step's snapshot would be taken here, just before the final one, with
        # nothing run in between: the same tree. When it starts from the base tree, its diff is
        # the final diff too, so the final snapshot records the step (one exec instead of two).
        step = self.pending if self.last_tree == self.base_tree else None
        try:  # the last snapshot also removes the snapshot git dir
            if step is None:
                self._settle()
            rebuilds, started = self.snapshots.rebuilds, time.perf_counter()
            tree, diff = self.snapshots.snapshot_diff(self.base_tree, last=True)
        except BaseException:
            if step is not None:
                self.pending = None  # the final diff's failure decides the attempt's fate
            self.snapshots.close()
            raise
        if step is not None:
            self.pending = None
            self.snapshot_ms += (time.perf_counter() - started) * 1000
            self._note_rebuild(rebuilds)
            self._record_step(step, tree, diff)
        (self.paths.root / "diffs" / "final.patch").write_text(self.redact(diff.patch), "utf-8")
        self.final_patch = diff.patch  # unredacted: this is what gets applied for scoring
        return diff.files, diff.lines_changed, diff.patch

    def close(self) -> None:
        """Record the pending step and remove the snapshot git dir if `final_diff` did not (on
        the local sandbox it lives in the host's /tmp); best effort, safe to call twice."""
        with contextlib.suppress(SandboxError):
            self._settle()
        self.snapshots.close()

    def final_diff_violation(self) -> str | None:
        """Edits made by any means (`run` included) must respect the task's edit policy."""
        files, lines, _ = self.final_diff()
        self.changed_files, self.lines_changed = files, lines
        policy = self.policy
        for path in files:
            if policy.editable_globs is not None and not matches_any(path, policy.editable_globs):
                return f"changed {path}, outside editable_globs"
            if policy.is_readonly(path):
                return f"changed {path}, which is read-only"
        if policy.max_changed_files is not None and len(files) > policy.max_changed_files:
            limit = policy.max_changed_files
            return f"changed {len(files)} files, more than max_changed_files={limit}"
        if policy.max_lines_changed is not None and lines > policy.max_lines_changed:
            return f"changed {lines} lines, more than max_lines_changed={policy.max_lines_changed}"
        return None

    def stats(self, outcome: AgentOutcome | None) -> AgentStats:
        return AgentStats(
            steps=outcome.steps if outcome and outcome.steps else self.step,
            tool_calls=self.step,
            tool_errors=self.errors,
            patches_rejected=self.patches_rejected,
            hunks_recounted=self.hunks_recounted,
            edits_refused=self.edits_refused,
            changed_files=self.changed_files,
            lines_changed=self.lines_changed,
            finished_by=outcome.finished_by if outcome else None,
        )
