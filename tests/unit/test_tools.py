"""The agent's tool box (tools/toolbox.py) against a LocalSandbox over a temporary workspace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.sandbox.local import LocalSandbox, LocalSandboxFactory
from pytest_agentbench.sandbox.port import SandboxError, SandboxSpec
from pytest_agentbench.tools.toolbox import TOOL_SCHEMAS, Toolbox, ToolPolicy, ToolResult

Events = list[tuple[str, dict[str, Any]]]


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "src" / "app.py").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    (root / "src" / "util.py").write_text("def helper():\n    return 'needle'\n")
    (root / "README.md").write_text("# demo\nneedle in readme\n")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02needle")
    return root


@pytest.fixture()
def sandbox(ws: Path, tmp_path: Path) -> Iterator[LocalSandbox]:
    spec = SandboxSpec(image="local", workspace=ws, env_dir=tmp_path / "env")
    box = LocalSandboxFactory().open(spec)
    yield box
    box.close()


def make(sandbox: LocalSandbox, **policy: Any) -> tuple[Toolbox, Events]:
    events: Events = []
    toolbox = Toolbox(sandbox, ToolPolicy(**policy),
                      on_event=lambda e: events.append((e.type, e.model_dump(exclude={"type"}))))
    return toolbox, events


def kinds(events: Events) -> list[str]:
    return [kind for kind, _ in events]


# -- read-only tools -------------------------------------------------------------------------------
def test_read_file_range_and_metadata(sandbox: LocalSandbox) -> None:
    tb, _ = make(sandbox)
    result = tb.call("read_file", {"path": "src/app.py", "start_line": 3, "end_line": 5})
    assert result.ok
    assert result.stdout == "line 3\nline 4\nline 5\n"
    assert result.total_lines == 20
    assert result.returned_line_range == (3, 5)
    assert not result.stdout_truncated
    assert result.to_observation().startswith("[src/app.py: lines 3-5 of 20]")


def test_read_file_caps_by_lines_and_bytes(sandbox: LocalSandbox, ws: Path) -> None:
    tb, _ = make(sandbox, max_read_lines=4)
    result = tb.call("read_file", {"path": "src/app.py"})
    assert result.returned_line_range == (1, 4)
    assert result.stdout_truncated
    assert "start_line=5" in result.to_observation()
    tb, _ = make(sandbox, max_read_bytes=20)
    result = tb.call("read_file", {"path": "src/app.py", "start_line": 10})
    assert result.stdout == "line 10\nline 11\n"
    assert result.returned_line_range == (10, 11)
    assert result.stdout_truncated


def test_read_file_errors(sandbox: LocalSandbox) -> None:
    tb, _ = make(sandbox)
    assert tb.call("read_file", {"path": "blob.bin"}).error_type == "INVALID_ARGUMENTS"
    missing = tb.call("read_file", {"path": "src/ap.py"})
    assert missing.error_type == "NOT_FOUND"
    assert "did you mean: src/app.py" in (missing.error_message or "")
    assert tb.call("read_file", {"path": "src"}).error_type == "INVALID_ARGUMENTS"
    past = tb.call("read_file", {"path": "src/app.py", "start_line": 99})
    assert past.error_type == "INVALID_ARGUMENTS" and "20 lines" in (past.error_message or "")
    assert tb.call("read_file", {"path": "../outside"}).error_type == "PATH_ESCAPE"
    assert tb.call("read_file", {"path": "/etc/passwd"}).error_type == "PATH_ESCAPE"


def test_list_files(sandbox: LocalSandbox) -> None:
    tb, _ = make(sandbox)
    result = tb.call("list_files", {})
    assert result.data["files"] == ["README.md", "blob.bin", "src/app.py", "src/util.py"]
    assert tb.call("list_files", {"glob": "*.py"}).data["files"] == ["src/app.py", "src/util.py"]
    assert tb.call("list_files", {"root": "src", "glob": "a*.py"}).data["files"] == ["src/app.py"]
    assert tb.call("list_files", {"root": "nope"}).error_type == "NOT_FOUND"
    tb, _ = make(sandbox, max_list_files=2)
    capped = tb.call("list_files", {})
    assert capped.stdout_truncated and capped.data["count"] == 4
    assert "showing the first 2 of 4" in capped.stdout


def test_search(sandbox: LocalSandbox) -> None:
    tb, _ = make(sandbox)
    result = tb.call("search", {"query": "needle"})
    assert result.ok
    assert result.stdout.splitlines() == ["README.md:2:needle in readme",
                                          "src/util.py:2:    return 'needle'"]
    assert result.data["files_skipped"] == 1  # the binary file
    only_py = tb.call("search", {"query": "ne+dle", "regex": True, "glob": "*.py"})
    assert [m["path"] for m in only_py.data["matches"]] == ["src/util.py"]
    capped = tb.call("search", {"query": "line", "max_results": 3})
    assert len(capped.data["matches"]) == 3 and capped.stdout_truncated
    assert tb.call("search", {"query": "(", "regex": True}).error_type == "INVALID_ARGUMENTS"
    assert "No matches" in tb.call("search", {"query": "zzz"}).stdout


# -- edits -----------------------------------------------------------------------------------------
def test_apply_patch_tool(sandbox: LocalSandbox, ws: Path) -> None:
    tb, events = make(sandbox)
    patch = ("--- a/src/util.py\n+++ b/src/util.py\n"
             "@@ -2 +2 @@\n-    return 'needle'\n+    return 1\n")
    result = tb.call("apply_patch", {"unified_diff": patch})
    assert result.ok and result.changed_files == ["src/util.py"]
    assert "return 1" in (ws / "src" / "util.py").read_text()
    assert tb.changed_files == {"src/util.py"}
    finished = [data for kind, data in events if kind == "tool_call_finished"]
    assert finished[-1]["changed_files"] == ["src/util.py"]
    rejected = tb.call("apply_patch", {"unified_diff": patch})
    assert rejected.error_type == "PATCH_REJECTED"
    assert rejected.data["hunk_index"] == 1 and "     2 |     return 1" in (
        rejected.data["nearest_context"] or "")
    assert "Nearest matching region" in rejected.to_observation()


def test_apply_patch_size_cap_and_escape(sandbox: LocalSandbox, ws: Path) -> None:
    tb, _ = make(sandbox, max_patch_bytes=50)
    big = "--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1 @@\n+" + "x" * 100 + "\n"
    assert tb.call("apply_patch", {"unified_diff": big}).error_type == "PATCH_TOO_LARGE"
    tb, _ = make(sandbox)
    escape = "--- /dev/null\n+++ b/../x\n@@ -0,0 +1 @@\n+evil\n"
    assert tb.call("apply_patch", {"unified_diff": escape}).error_type == "PATH_ESCAPE"
    assert not (ws.parent / "x").exists()


def test_write_and_remove_file(sandbox: LocalSandbox, ws: Path) -> None:
    tb, _ = make(sandbox)
    written = tb.call("write_file", {"path": "src/new/mod.py", "content": "x = 1\n"})
    assert written.ok and written.changed_files == ["src/new/mod.py"]
    assert (ws / "src" / "new" / "mod.py").read_text() == "x = 1\n"
    removed = tb.call("remove_file", {"path": "README.md"})
    assert removed.ok and not (ws / "README.md").exists()
    assert tb.call("remove_file", {"path": "README.md"}).error_type == "NOT_FOUND"
    is_dir = tb.call("remove_file", {"path": "src"})
    assert is_dir.error_type == "INVALID_ARGUMENTS" and "directory" in (is_dir.error_message or "")
    is_dir = tb.call("write_file", {"path": "src", "content": ""})
    assert is_dir.error_type == "INVALID_ARGUMENTS" and "directory" in (is_dir.error_message or "")
    assert tb.changed_files == {"src/new/mod.py", "README.md"}
    assert tb.lines_changed == 3


def test_write_disabled(sandbox: LocalSandbox) -> None:
    tb, _ = make(sandbox, allow_file_write=False)
    assert tb.call("write_file", {"path": "a", "content": ""}).error_type == "WRITE_DISABLED"
    assert tb.call("remove_file", {"path": "README.md"}).error_type == "WRITE_DISABLED"
    names = [s["function"]["name"] for s in tb.tool_schemas()]
    assert "write_file" not in names and "apply_patch" in names


def test_editable_globs_refusal_emits_event(sandbox: LocalSandbox, ws: Path) -> None:
    tb, events = make(sandbox, editable_globs=["src/**"])
    patch = "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# demo\n+# hacked\n"
    result = tb.call("apply_patch", {"unified_diff": patch})
    assert result.error_type == "EDIT_NOT_ALLOWED"
    assert (ws / "README.md").read_text().startswith("# demo")
    assert ("edit_refused", {"path": "README.md", "rule": "editable_globs"}) in events
    assert tb.call("write_file", {"path": "src/ok.py", "content": "ok\n"}).ok
    assert tb.call("write_file", {"path": "tests/t.py", "content": ""}).error_type == (
        "EDIT_NOT_ALLOWED")


def test_readonly_git_config(sandbox: LocalSandbox, ws: Path) -> None:
    tb, events = make(sandbox)
    for call in (
        ("write_file", {"path": ".git/config", "content": "evil"}),
        ("write_file", {"path": "src/../.git/config", "content": "evil"}),
        ("remove_file", {"path": ".git/config"}),
        ("apply_patch", {"unified_diff": "--- a/.git/config\n+++ b/.git/config\n"
                                         "@@ -1 +1 @@\n-[core]\n+[evil]\n"}),
    ):
        assert tb.call(*call).error_type == "EDIT_NOT_ALLOWED", call
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert ("edit_refused", {"path": ".git/config", "rule": "readonly_globs"}) in events


def test_max_changed_files_is_cumulative(sandbox: LocalSandbox, ws: Path) -> None:
    tb, events = make(sandbox, max_changed_files=2)
    assert tb.call("write_file", {"path": "a.txt", "content": "a\n"}).ok
    assert tb.call("write_file", {"path": "a.txt", "content": "a2\n"}).ok  # same file again
    patch = ("--- /dev/null\n+++ b/b.txt\n@@ -0,0 +1 @@\n+b\n"
             "--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+c\n")
    result = tb.call("apply_patch", {"unified_diff": patch})
    assert result.error_type == "LIMIT_EXCEEDED"
    assert not (ws / "b.txt").exists() and not (ws / "c.txt").exists()
    assert ("edit_refused", {"path": "b.txt", "rule": "max_changed_files"}) in events
    assert tb.call("write_file", {"path": "b.txt", "content": "b\n"}).ok
    assert tb.call("remove_file", {"path": "README.md"}).error_type == "LIMIT_EXCEEDED"


def test_max_lines_changed(sandbox: LocalSandbox) -> None:
    tb, _ = make(sandbox, max_lines_changed=3)
    assert tb.call("write_file", {"path": "a.txt", "content": "1\n2\n"}).ok
    result = tb.call("write_file", {"path": "b.txt", "content": "1\n2\n"})
    assert result.error_type == "LIMIT_EXCEEDED"


# -- run -------------------------------------------------------------------------------------------
def test_run_ok_and_failure(sandbox: LocalSandbox) -> None:
    tb, _ = make(sandbox)
    result = tb.call("run", {"command": "cat src/util.py; echo oops >&2; exit 3",
                             "env": {"GREETING": "hi"}})
    assert result.ok and result.error_type is None  # the tool worked; the command failed
    assert result.exit_code == 3
    assert "needle" in result.stdout and result.stderr == "oops\n"
    assert result.stdout_n_lines == 2 and result.stderr_n_lines == 1
    assert tb.call("run", {"command": "echo $GREETING", "env": {"GREETING": "hi"}}).stdout == "hi\n"


def test_run_output_is_capped(sandbox: LocalSandbox) -> None:
    tb, _ = make(sandbox, max_output_bytes=1024)
    result = tb.call("run", {"command": "seq 1 100000"})
    assert result.ok and result.stdout_truncated
    assert len(result.stdout.encode()) < 2048
    assert result.stdout_n_lines == 100000
    assert "truncated" in result.to_observation()


def test_run_forbidden_command(sandbox: LocalSandbox, ws: Path) -> None:
    tb, _ = make(sandbox, forbidden_commands=[r"\bcurl\b", r"pip\s+install"])
    result = tb.call("run", {"command": "touch marker && curl http://example.com"})
    assert result.error_type == "FORBIDDEN_COMMAND"
    assert not (ws / "marker").exists()
    assert tb.call("run", {"command": "python -m pip  install x"}).error_type == (
        "FORBIDDEN_COMMAND")


def test_run_timeout(sandbox: LocalSandbox) -> None:
    tb, _ = make(sandbox, tool_timeout_sec=0.5)
    result = tb.call("run", {"command": "echo started; sleep 30", "timeout_sec": 60})
    assert result.error_type == "TIMEOUT" and not result.ok
    assert result.data["timeout_sec"] == 0.5
    assert result.duration_ms < 10_000


def test_symlink_planted_with_run_cannot_be_read(sandbox: LocalSandbox) -> None:
    tb, _ = make(sandbox)
    assert tb.call("run", {"command": "ln -s /etc etc_link && ln -s /etc/passwd pw"}).ok
    assert tb.call("read_file", {"path": "etc_link/passwd"}).error_type == "PATH_ESCAPE"
    assert tb.call("read_file", {"path": "pw"}).error_type == "PATH_ESCAPE"
    assert tb.call("write_file", {"path": "etc_link/x", "content": ""}).error_type == (
        "PATH_ESCAPE")
    found = tb.call("search", {"query": "root"}).data["matches"]
    assert [m for m in found if m["path"] in ("pw", "etc_link/passwd")] == []
    assert tb.call("list_files", {"root": "etc_link"}).error_type == "PATH_ESCAPE"


# -- the call contract -----------------------------------------------------------------------------
def test_unknown_tool_and_bad_arguments(sandbox: LocalSandbox) -> None:
    tb, _ = make(sandbox)
    unknown = tb.call("rm_rf", {})
    assert unknown.error_type == "UNKNOWN_TOOL" and "read_file" in (unknown.error_message or "")
    cases: list[Any] = [
        {"path": 3},
        {},
        {"path": "a", "bogus": 1},
        {"path": "a", "start_line": 0},
        {"path": "a", "start_line": "1"},
        {"path": "a", "start_line": True},
        ["a"],
    ]
    for arguments in cases:
        result = tb.call("read_file", arguments)
        assert result.error_type == "INVALID_ARGUMENTS", arguments
    assert tb.call("run", {"command": "true", "timeout_sec": 0}).error_type == "INVALID_ARGUMENTS"
    assert tb.call("run", {"command": "true", "env": {"A": 1}}).error_type == "INVALID_ARGUMENTS"
    assert tb.call("read_file", {"path": "src/app.py", "end_line": 2.0}).ok  # integral float


def test_events_and_result_serialization(sandbox: LocalSandbox) -> None:
    tb, events = make(sandbox)
    first = tb.call("read_file", {"path": "src/app.py", "end_line": 1})
    tb.call("read_file", {"path": "src/app.py", "end_line": 1})
    assert kinds(events) == ["tool_call_started", "tool_call_finished"] * 2
    started, finished = events[0][1], events[1][1]
    assert set(started) == {"tool", "step", "inputs_sha256"}
    assert set(finished) == {"tool", "step", "ok", "error_type", "duration_ms", "outputs_sha256",
                             "stdout_truncated", "stderr_truncated", "changed_files"}
    assert (started["step"], events[2][1]["step"]) == (1, 2)
    assert started["inputs_sha256"] == events[2][1]["inputs_sha256"]
    assert finished["outputs_sha256"] == events[3][1]["outputs_sha256"]  # durations not hashed
    record = json.loads(json.dumps(first.to_dict()))
    assert record["returned_line_range"] == [1, 1] and record["tool"] == "read_file"
    assert isinstance(ToolResult(ok=True).to_observation(), str)


def test_sandbox_errors_propagate(sandbox: LocalSandbox) -> None:
    tb, events = make(sandbox)
    sandbox.close()
    with pytest.raises(SandboxError):
        tb.call("run", {"command": "true"})
    assert events[-1][0] == "tool_call_finished" and events[-1][1]["ok"] is False


def test_schemas_cover_every_tool() -> None:
    names = [s["function"]["name"] for s in TOOL_SCHEMAS]
    assert names == ["list_files", "read_file", "search", "apply_patch", "run", "write_file",
                     "remove_file", "finish"]
    for schema in TOOL_SCHEMAS:
        assert schema["type"] == "function"
        params = schema["function"]["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params["required"]) <= set(params["properties"])
    json.dumps(TOOL_SCHEMAS)


def test_policy_always_protects_git() -> None:
    policy = ToolPolicy(readonly_globs=["docs/**"])
    assert policy.readonly_globs == ["docs/**", ".git", ".git/**"]
    assert ToolPolicy().max_output_bytes == 32 * 1024
