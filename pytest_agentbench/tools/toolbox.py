"""The agent's tool box: one `call(name, arguments)` entry point.

`call` never raises for the agent's mistakes; it returns a ToolResult whose `error_type` says what
went wrong. Only infrastructure failures (`SandboxError`) propagate. Every call hands a
ToolCallStarted and a ToolCallFinished event (schemas/events.py) to `on_event`; a refused edit
an EditRefused event. The toolbox writes no event itself: the caller's callback does.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest_agentbench.tools.read_only as read_only
import pytest_agentbench.tools.search as tool_search
from pytest_agentbench.paths.deadline import host_deadline
from pytest_agentbench.paths.files import PathEscape
from pytest_agentbench.paths.globs import GlobError
from pytest_agentbench.paths.regular_files import FileTooLarge, NotRegularFile
from pytest_agentbench.sandbox.port import Sandbox, SandboxError
from pytest_agentbench.schemas.events import EditRefused as EditRefusedEvent
from pytest_agentbench.schemas.events import ToolCallFinished, ToolCallStarted
from pytest_agentbench.text.truncation import truncate
from pytest_agentbench.tools.edit_rules import (
    EditNotAllowed,
    WriteDisabled,
    check_editable,
    check_limits,
    count_changed_lines,
)
from pytest_agentbench.tools.patching import PatchError, normalize_path, plan_patch
from pytest_agentbench.tools.results import ErrorType, ToolPolicy, ToolResult
from pytest_agentbench.tools.tool_schemas import (
    TOOL_SCHEMAS,
    WRITE_TOOLS,
    ArgumentError,
    check_arguments,
)

__all__ = ["TOOL_SCHEMAS", "ErrorType", "EventCallback", "ToolPolicy", "ToolResult", "Toolbox"]

ToolEvent = ToolCallStarted | ToolCallFinished | EditRefusedEvent
EventCallback = Callable[[ToolEvent], None]  # e.g. lambda event: sink.emit(event, actor="tool")


class Toolbox:
    def __init__(
        self,
        sandbox: Sandbox,
        policy: ToolPolicy | None = None,
        on_event: EventCallback | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.files = sandbox.files
        self.policy = policy or ToolPolicy()
        self.on_event = on_event
        self.step = 0
        self.changed_files: set[str] = set()
        self.lines_changed = 0
        self._handlers: dict[str, Callable[..., ToolResult]] = {
            "list_files": self._list_files,
            "read_file": self._read_file,
            "search": self._search,
            "apply_patch": self._apply_patch,
            "run": self._run,
            "write_file": self._write_file,
            "remove_file": self._remove_file,
            "finish": self._finish,
        }

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The schemas to offer the model (write_file/remove_file only when writes are allowed)."""
        return [
            s
            for s in TOOL_SCHEMAS
            if self.policy.allow_file_write or s["function"]["name"] not in WRITE_TOOLS
        ]

    # -- the entry point ----------------------------------------------------------------------
    def call(self, name: str, arguments: Mapping[str, Any] | Any) -> ToolResult:
        self.step += 1
        step = self.step
        tool = name if isinstance(name, str) else repr(name)
        inputs_sha256 = _sha256({"tool": tool, "arguments": arguments})
        self._emit(ToolCallStarted(tool=tool, step=step, inputs_sha256=inputs_sha256))
        started = time.monotonic()
        try:
            # Every host-side file operation of the call (listings, reads) shares its budget.
            with host_deadline(self.policy.tool_timeout_sec):
                result = self._dispatch(tool, arguments)
        except BaseException:  # SandboxError (or a harness bug): close the span, then propagate
            self._emit(
                ToolCallFinished(
                    tool=tool,
                    step=step,
                    ok=False,
                    error_type="SANDBOX_ERROR",
                    duration_ms=int((time.monotonic() - started) * 1000),
                    outputs_sha256="",
                    stdout_truncated=False,
                    stderr_truncated=False,
                    changed_files=[],
                )
            )
            raise
        duration_ms = int((time.monotonic() - started) * 1000)
        result.tool = tool
        result.duration_ms = duration_ms
        self._emit(
            ToolCallFinished(
                tool=tool,
                step=step,
                ok=result.ok,
                error_type=result.error_type,
                duration_ms=duration_ms,
                outputs_sha256=_sha256(_outputs(result)),
                stdout_truncated=result.stdout_truncated,
                stderr_truncated=result.stderr_truncated,
                changed_files=list(result.changed_files),
            )
        )
        return result

    def _dispatch(self, tool: str, arguments: Any) -> ToolResult:
        if tool not in self._handlers:
            names = [s["function"]["name"] for s in self.tool_schemas()]
            return ToolResult.error(
                ErrorType.UNKNOWN_TOOL, f"unknown tool {tool!r}; available: {', '.join(names)}"
            )
        try:
            args = check_arguments(tool, arguments)
            return self._handlers[tool](**args)
        except ArgumentError as exc:
            return ToolResult.error(ErrorType.INVALID_ARGUMENTS, f"{tool}: {exc}")
        except WriteDisabled:
            return ToolResult.error(
                ErrorType.WRITE_DISABLED,
                f"{tool} is disabled for this agent; make changes with apply_patch",
            )
        except EditNotAllowed as exc:
            self._emit(EditRefusedEvent(path=exc.path, rule=exc.rule))
            return ToolResult.error(exc.error_type, str(exc))
        except PatchError as exc:
            return ToolResult.error(ErrorType.PATCH_REJECTED, str(exc), data=exc.to_dict())
        except PathEscape as exc:
            return ToolResult.error(ErrorType.PATH_ESCAPE, str(exc))
        except SandboxError:
            raise
        except NotRegularFile as exc:
            return ToolResult.error(ErrorType.INVALID_ARGUMENTS, str(exc))
        except FileTooLarge as exc:
            return ToolResult.error(ErrorType.LIMIT_EXCEEDED, str(exc))
        except GlobError as exc:
            return ToolResult.error(ErrorType.INVALID_ARGUMENTS, f"{tool}: {exc}")
        except (FileNotFoundError, NotADirectoryError) as exc:
            return ToolResult.error(ErrorType.NOT_FOUND, _os_message(exc))
        except OSError as exc:
            return ToolResult.error(ErrorType.INVALID_ARGUMENTS, _os_message(exc))

    def _emit(self, event: ToolEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    # -- read-only tools ----------------------------------------------------------------------
    def _list_files(self, root: str = ".", glob: str | None = None) -> ToolResult:
        return read_only.list_files(self.files, self.policy, root, glob)

    def _read_file(
        self, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> ToolResult:
        return read_only.read_file(self.files, self.policy, path, start_line, end_line)

    def _search(
        self, query: str, glob: str | None = None, max_results: int = 50, regex: bool = False
    ) -> ToolResult:
        deadline = time.monotonic() + self.policy.tool_timeout_sec
        return tool_search.search(
            self.files, self.policy, query, glob, max_results, regex, deadline
        )

    # -- run ------------------------------------------------------------------------------------
    # `ok` means the command ran to completion (error_type is None); its verdict is `exit_code`.
    def _run(
        self, command: str, timeout_sec: float | None = None, env: dict[str, str] | None = None
    ) -> ToolResult:
        if not command.strip():
            return ToolResult.error(ErrorType.INVALID_ARGUMENTS, "command must not be empty")
        pattern = self.policy.forbidden_match(command)
        if pattern is not None:
            return ToolResult.error(
                ErrorType.FORBIDDEN_COMMAND,
                f"command refused: it matches the forbidden pattern {pattern!r}",
            )
        limit = self.policy.tool_timeout_sec
        timeout = min(timeout_sec, limit) if timeout_sec else limit
        res = self.sandbox.exec(command, timeout_sec=timeout, env=env)
        out = truncate(res.stdout, max_bytes=self.policy.max_output_bytes)
        err = truncate(res.stderr, max_bytes=self.policy.max_output_bytes)
        result = ToolResult(
            ok=not res.timed_out,
            stdout=out.text,
            stderr=err.text,
            exit_code=res.exit_code,
            stdout_truncated=out.truncated or res.stdout_truncated,
            stderr_truncated=err.truncated or res.stderr_truncated,
            stdout_n_lines=max(out.total_lines, res.stdout_total_lines),
            stderr_n_lines=max(err.total_lines, res.stderr_total_lines),
            data={"timeout_sec": timeout, "oom_killed": res.oom_killed,
                  "disk_limit_exceeded": res.disk_limit_exceeded},
        )
        if res.timed_out:
            result.error_type = ErrorType.TIMEOUT.value
            result.error_message = f"command timed out after {timeout:g}s and was killed"
        elif res.disk_limit_exceeded:
            result.ok = False
            result.error_type = ErrorType.LIMIT_EXCEEDED.value
            result.error_message = (
                "the workspace reached its disk limit; the command's writes failed or it was "
                "killed: remove what it wrote before going on"
            )
        return result

    # -- edits ----------------------------------------------------------------------------------
    def _apply_patch(self, unified_diff: str) -> ToolResult:
        size = len(unified_diff.encode())
        if size > self.policy.max_patch_bytes:
            return ToolResult.error(
                ErrorType.PATCH_TOO_LARGE,
                f"patch is {size} bytes; the "
                f"limit is {self.policy.max_patch_bytes}; split it into "
                "smaller patches",
            )
        plan = plan_patch(
            self.files, unified_diff, self._check_edit, max_offset=self.policy.patch_max_offset
        )
        outcome = plan.outcome
        self._check_limits(set(outcome.changed_files), outcome.lines_added + outcome.lines_removed)
        plan.commit(self.files)
        self._record(outcome.changed_files, outcome.lines_added + outcome.lines_removed)
        return ToolResult(
            ok=True,
            stdout=outcome.summary(),
            changed_files=list(outcome.changed_files),
            data=outcome.to_dict(),
        )

    def _write_file(self, path: str, content: str) -> ToolResult:
        path = self._writable(path)
        data = content.encode("utf-8", "surrogateescape")
        if len(data) > self.policy.max_patch_bytes:
            return ToolResult.error(
                ErrorType.LIMIT_EXCEEDED,
                f"content is {len(data)} bytes; the limit is {self.policy.max_patch_bytes}",
            )
        old = self._read_or_none(path)
        if old == data:
            return ToolResult(ok=True, stdout=f"{path} unchanged (same content)")
        lines = count_changed_lines(old or b"", data)
        self._check_limits({path}, lines)
        self.files.write_bytes(path, data)
        self._record([path], lines)
        verb = "created" if old is None else "overwrote"
        return ToolResult(
            ok=True,
            stdout=f"{verb} {path} ({len(data)} bytes)",
            changed_files=[path],
            data={"path": path, "created": old is None},
        )

    def _remove_file(self, path: str) -> ToolResult:
        path = self._writable(path)
        if not self.files.exists(path):
            raise FileNotFoundError(f"no such file: {path}")
        try:
            old = self.files.read_bytes(path, max_bytes=read_only.READ_HARD_LIMIT)
        except (PathEscape, NotRegularFile):
            old = b""  # a symlink pointing outside, a FIFO: removing the entry itself is safe
        except IsADirectoryError:
            raise IsADirectoryError(f"{path} is a directory; remove_file removes files") from None
        lines = count_changed_lines(old, b"")
        self._check_limits({path}, lines)
        self.files.remove(path)
        self._record([path], lines)
        return ToolResult(
            ok=True, stdout=f"removed {path}", changed_files=[path], data={"path": path}
        )

    def _finish(self, summary: str) -> ToolResult:
        return ToolResult(ok=True, stdout="finished", data={"finish": True, "summary": summary})

    # -- edit policy ----------------------------------------------------------------------------
    def _writable(self, path: str) -> str:
        if not self.policy.allow_file_write:
            raise WriteDisabled
        path = normalize_path(path)
        self._check_edit(path)
        return path

    def _check_edit(self, path: str) -> None:
        check_editable(self.policy, path)

    def _check_limits(self, paths: set[str], lines: int) -> None:
        check_limits(self.policy, self.changed_files, self.lines_changed, paths, lines)

    def _record(self, paths: list[str], lines: int) -> None:
        self.changed_files.update(paths)
        self.lines_changed += lines

    def _read_or_none(self, path: str) -> bytes | None:
        """The current content (its first READ_HARD_LIMIT bytes), None when there is no file."""
        try:
            return self.files.read_bytes(path, max_bytes=read_only.READ_HARD_LIMIT)
        except FileNotFoundError:
            return None


def _outputs(result: ToolResult) -> dict[str, Any]:
    out = result.to_dict()
    out.pop("duration_ms", None)
    return out


def _sha256(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _os_message(exc: OSError) -> str:
    if exc.strerror and exc.filename:
        return f"{exc.filename}: {exc.strerror}"
    text = str(exc)
    if " " not in text:  # a bare path from the Files layer
        kind = {
            FileNotFoundError: "no such file or directory",
            IsADirectoryError: "is a directory",
            NotADirectoryError: "not a directory",
        }
        text = f"{text}: {kind.get(type(exc), type(exc).__name__)}"
    return text
