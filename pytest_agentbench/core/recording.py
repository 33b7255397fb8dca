"""The toolbox the agent actually holds: every call recorded, every edit diffed.

Wraps the Toolbox so agents need no cooperation: each call goes to `agent/tool_calls.jsonl`
(redacted), a call that raises included (its exception is the result), and after any call that
may have changed files the workspace tree is compared with the last snapshot; a change becomes
`diffs/step_NNNN.patch` and a `patch_applied` event. Snapshots come from one `Snapshotter` per
sandbox (core/gitops.py), whose first tree is the base of the final diff.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from pytest_agentbench.agents.port import AgentOutcome
from pytest_agentbench.core.events import EventSink
from pytest_agentbench.core.gitops import SnapshotError, Snapshotter
from pytest_agentbench.core.rundir import AttemptPaths
from pytest_agentbench.paths.globs import matches_any
from pytest_agentbench.sandbox.port import Sandbox, SandboxError
from pytest_agentbench.schemas.events import Note, PatchApplied, utc_now
from pytest_agentbench.schemas.records import AgentStats
from pytest_agentbench.tools.toolbox import Toolbox, ToolResult

MUTATING = frozenset({"apply_patch", "write_file", "remove_file", "run"})


class RecordingToolbox:
    def __init__(
        self,
        inner: Toolbox,
        sandbox: Sandbox,
        paths: AttemptPaths,
        events: EventSink,
        redact: Callable[[str], str],
        deadline: float,
    ) -> None:
        self.inner, self.sandbox, self.paths, self.events = inner, sandbox, paths, events
        self.redact, self.deadline = redact, deadline
        self.redact_obj = events.redact_obj
        self.policy = inner.policy
        self.step = 0
        self.errors = 0
        self.patches_rejected = 0
        self.edits_refused = 0
        self.snapshots = Snapshotter(sandbox)
        self.base_tree = self.snapshots.snapshot()
        self.last_tree = self.base_tree
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
            result = self.inner.call(name, arguments)
        except BaseException as exc:  # the sandbox died (or worse): the call is still recorded
            kind = "SANDBOX_ERROR" if isinstance(exc, SandboxError) else "HARNESS_ERROR"
            self._log_call(name, arguments, {
                "ok": False, "tool": name, "error_type": kind, "exception": type(exc).__name__,
                "error_message": f"{type(exc).__name__}: {exc}"[:2000],
            })
            raise
        if not result.ok:
            self.errors += 1
            if result.error_type == "PATCH_REJECTED":
                self.patches_rejected += 1
            if result.error_type == "EDIT_NOT_ALLOWED":
                self.edits_refused += 1
        self._log_call(name, arguments, result.to_dict())
        if name in MUTATING:
            self._snapshot_step()
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

    def _snapshot_step(self) -> None:
        rebuilds = self.snapshots.rebuilds
        try:
            tree, diff = self.snapshots.snapshot_diff(self.last_tree)
            if self.snapshots.rebuilds > rebuilds:
                self.events.emit(Note(
                    kind="snapshot_rebuilt",
                    message="the harness's snapshot index was changed or removed; rebuilt",
                ))
            if tree == self.last_tree:
                return
        except SnapshotError as exc:  # the agent's doing; the final diff decides its fate
            self.events.emit(Note(kind="snapshot_failed", message=str(exc)[:300]))
            return
        self.last_tree = tree
        self.diff_steps += 1
        path = self.paths.root / "diffs" / f"step_{self.step:04d}.patch"
        path.write_text(self.redact(diff.patch), "utf-8")
        self.events.emit(
            PatchApplied(
                step=self.step, changed_files=diff.files, diff_path=self.paths.relative(path)
            ),
            actor="tool",
        )

    def final_diff(self) -> tuple[list[str], int, str]:
        try:  # the last snapshot also removes the snapshot git dir
            diff = self.snapshots.snapshot_diff(self.base_tree, last=True)[1]
        except BaseException:
            self.snapshots.close()
            raise
        (self.paths.root / "diffs" / "final.patch").write_text(self.redact(diff.patch), "utf-8")
        self.final_patch = diff.patch  # unredacted: this is what gets applied for scoring
        return diff.files, diff.lines_changed, diff.patch

    def close(self) -> None:
        """Remove the snapshot git dir if `final_diff` did not (on the local sandbox it lives in
        the host's /tmp); best effort, safe to call twice."""
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
            edits_refused=self.edits_refused,
            changed_files=self.changed_files,
            lines_changed=self.lines_changed,
            finished_by=outcome.finished_by if outcome else None,
        )
