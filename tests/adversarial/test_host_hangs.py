"""Issue 8 item 4: no host-side tool may hang or burn the host's CPU on what the agent left.

The tools read, write, list and search the workspace from the host, over data the agent controls:
a FIFO (`mkfifo p`) blocked `read_file p`, `search` and `write_file` forever in open(); a
backtracking regex in `search`, a forbidden-command pattern against a crafted command, or a glob
with many stars in `list_files` ran without a deadline; a deep tree crashed the listing. Each call
here runs in a forked child that is killed after a few seconds, so on 4a9ba26 these tests fail
(hung) instead of hanging the suite; now each returns within its bound with a clear tool error or
a result that says it was cut.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import socket
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_agentbench.sandbox.local import LocalSandbox, LocalSandboxFactory
from pytest_agentbench.sandbox.port import SandboxSpec
from pytest_agentbench.tools.toolbox import Toolbox, ToolPolicy, ToolResult
from tests.support.deep_tree import nest_dirs

T = TypeVar("T")
PATHOLOGICAL_GLOB = "*a*a*a*a*a*a*a*b"


def bounded(fn: Callable[[], T], seconds: float = 30.0) -> tuple[T, float]:
    """fn() in a forked child, killed after `seconds`: (its result, elapsed seconds). The bounds
    are generous (the regex timeouts count CPU time, and a loaded CI machine stretches wall
    time); what failed on 4a9ba26 never returned at all."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            send.send(("ok", fn()))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            send.send(("raised", f"{type(exc).__name__}: {exc}"))

    started = time.monotonic()
    process = ctx.Process(target=child, daemon=True)
    process.start()
    try:
        if not receive.poll(seconds):
            pytest.fail(f"hung: no answer within {seconds:g}s", pytrace=False)
        kind, value = receive.recv()
    finally:
        process.kill()
        process.join(10)
    elapsed = time.monotonic() - started
    if kind == "raised":
        pytest.fail(f"the call raised instead of returning a tool result: {value}")
    return value, elapsed


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("needle = 1\n")
    (root / "README.md").write_text("# demo\nneedle\n")
    return root


@pytest.fixture
def sandbox(ws: Path, tmp_path: Path) -> Iterator[LocalSandbox]:
    box = LocalSandboxFactory().open(SandboxSpec(image="local", workspace=ws,
                                                 env_dir=tmp_path / "env"))
    yield box
    box.close()


def call(sandbox: LocalSandbox, tool: str, args: dict[str, Any], seconds: float = 30.0,
         **policy: Any) -> tuple[ToolResult, float]:
    return bounded(lambda: Toolbox(sandbox, ToolPolicy(**policy)).call(tool, args), seconds)


# -- FIFOs, sockets ----------------------------------------------------------------------------
def test_item4_read_file_refuses_a_fifo_without_blocking(sandbox: LocalSandbox, ws: Path) -> None:
    os.mkfifo(ws / "p")
    result, _ = call(sandbox, "read_file", {"path": "p"})
    assert result.error_type == "INVALID_ARGUMENTS"
    assert "FIFO" in (result.error_message or "") and "regular file" in (result.error_message or "")


def test_item4_write_file_never_opens_a_fifo(sandbox: LocalSandbox, ws: Path) -> None:
    os.mkfifo(ws / "p")
    # a reader waiting on the FIFO: a writer's open would succeed and feed it
    reader = os.open(ws / "p", os.O_RDONLY | os.O_NONBLOCK)
    try:
        result, _ = call(sandbox, "write_file", {"path": "p", "content": "x"})
        assert result.error_type == "INVALID_ARGUMENTS" and "FIFO" in (result.error_message or "")
        assert os.read(reader, 10) == b""  # no writer ever came: nothing was written
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(ws / "p").st_mode)


def test_item4_remove_file_still_removes_a_fifo(sandbox: LocalSandbox, ws: Path) -> None:
    os.mkfifo(ws / "p")
    result, _ = call(sandbox, "remove_file", {"path": "p"})
    assert result.ok, result.error_message
    assert not os.path.lexists(ws / "p")


def test_item4_search_and_list_skip_fifos_and_sockets(sandbox: LocalSandbox, ws: Path) -> None:
    os.mkfifo(ws / "src" / "p.py")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ws / "s.py"))
    sock.close()
    found, _ = call(sandbox, "search", {"query": "needle"})
    assert found.ok and {m["path"] for m in found.data["matches"]} == {"README.md", "src/app.py"}
    listed, _ = call(sandbox, "list_files", {"glob": "*.py"})
    assert listed.data["files"] == ["src/app.py"]
    read, _ = call(sandbox, "read_file", {"path": "s.py"})
    assert read.error_type == "INVALID_ARGUMENTS" and "socket" in (read.error_message or "")


def test_item4_apply_patch_onto_a_fifo_is_an_error(sandbox: LocalSandbox, ws: Path) -> None:
    os.mkfifo(ws / "p")
    patch = "--- a/p\n+++ b/p\n@@ -1 +1 @@\n-a\n+b\n"
    result, _ = call(sandbox, "apply_patch", {"unified_diff": patch})
    assert not result.ok and "FIFO" in (result.error_message or "")


# -- regexes and globs ------------------------------------------------------------------------
def test_item4_backtracking_regex_in_search_stops_with_a_timeout(sandbox: LocalSandbox,
                                                                 ws: Path) -> None:
    (ws / "bomb.txt").write_text("a" * 80 + "!\n")
    result, elapsed = call(sandbox, "search", {"query": "(a|aa)+$", "regex": True}, seconds=60)
    assert result.error_type == "TIMEOUT", result
    assert "backtracking" in (result.error_message or "") and "bomb.txt" in (
        result.error_message or "")
    assert elapsed < 45


def test_item4_search_regex_respects_the_tool_deadline(sandbox: LocalSandbox, ws: Path) -> None:
    for i in range(30):
        (ws / f"bomb{i}.txt").write_text("a" * 26 + "!\n")
    result, elapsed = call(sandbox, "search", {"query": "(a|aa)+$", "regex": True},
                           seconds=60, tool_timeout_sec=1.5)
    assert result.data["truncated"] and result.data["stopped"] == "the time limit"
    assert "stopped at the time limit" in result.stdout
    assert elapsed < 45


def test_item4_python_regex_syntax_still_works(sandbox: LocalSandbox, ws: Path) -> None:
    (ws / "m.py").write_text("def foo(x):\n    return foo_bar\nfoo foo\n")
    for query, lines in ((r"(?<=def )foo", [1]), (r"\b(\w+) \1\b", [3]), (r"(?P<n>foo)_bar", [2])):
        result, _ = call(sandbox, "search", {"query": query, "regex": True, "glob": "m.py"})
        assert [m["line"] for m in result.data["matches"]] == lines, query


def test_item4_pathological_glob_in_list_files_is_linear(sandbox: LocalSandbox, ws: Path) -> None:
    (ws / ("a" * 200)).write_text("")
    (ws / ("a" * 8 + "b")).write_text("")
    result, elapsed = call(sandbox, "list_files", {"glob": PATHOLOGICAL_GLOB})
    assert result.data["files"] == ["a" * 8 + "b"]
    searched, _ = call(sandbox, "search", {"query": "x", "glob": PATHOLOGICAL_GLOB})
    assert searched.ok
    assert elapsed < 20


def test_item4_overlong_glob_is_refused(sandbox: LocalSandbox) -> None:
    result, _ = call(sandbox, "list_files", {"glob": "*" * 5000})
    assert result.error_type == "INVALID_ARGUMENTS" and "limit" in (result.error_message or "")


def test_item4_backtracking_forbidden_pattern_fails_closed(sandbox: LocalSandbox,
                                                           ws: Path) -> None:
    command = "echo " + "a" * 40 + "!"
    result, elapsed = call(sandbox, "run", {"command": command}, seconds=60,
                           forbidden_commands=[r"(a|aa)+$"])
    assert result.error_type == "FORBIDDEN_COMMAND"
    assert elapsed < 45


def test_item4_globs_match_like_before() -> None:
    from pytest_agentbench.paths.globs import matches_any

    cases = [
        ("src/*.py", "src/a.py", True), ("src/*.py", "src/a/b.py", False),
        ("src/**/test_*.py", "src/test_a.py", True),
        ("src/**/test_*.py", "src/x/y/test_a.py", True),
        ("**", "a/b", True), ("**/*.md", "README.md", True), ("**/*.md", "d/README.md", True),
        ("a?c", "abc", True), ("a?c", "a/c", False), (".git/**", ".git/config", True),
        ("./docs/**", "docs/x", True), ("*a*a*b", "xaxayb", True), ("*a*a*b", "aab/b", False),
        ("tests/**", "tests/a\nb.py", True),  # a newline in a name is no way around a glob
    ]
    for pattern, path, expected in cases:
        assert matches_any(path, [pattern]) is expected, (pattern, path)


# -- listings ---------------------------------------------------------------------------------
@pytest.fixture
def deep_tree(ws: Path) -> Iterator[Path]:
    """1100 nested directories: os.walk recursed once per level (RecursionError)."""
    yield nest_dirs(ws, 1100)
    # pytest's tmp_path cleanup (shutil.rmtree) recurses once per level too: remove it here
    try:
        from pytest_agentbench.paths.trees import remove_tree
    except ImportError:  # 4a9ba26
        import subprocess

        subprocess.run(["rm", "-rf", str(ws / "d")], check=False)
    else:
        assert remove_tree(ws / "d") == []
    assert not (ws / "d").exists()


def test_item4_deep_tree_and_symlink_loops_do_not_break_listings(
        sandbox: LocalSandbox, ws: Path, deep_tree: Path) -> None:
    os.symlink("loop-b", ws / "loop-a")
    os.symlink("loop-a", ws / "loop-b")
    os.symlink(".", ws / "self")
    listed, _ = call(sandbox, "list_files", {})
    assert listed.ok and "src/app.py" in listed.data["files"]
    assert "directory levels" in (listed.data["incomplete"] or "")
    read, _ = call(sandbox, "read_file", {"path": "loop-a"})
    assert not read.ok
    found, _ = call(sandbox, "search", {"query": "needle"})
    assert found.ok and len(found.data["matches"]) == 2


def test_item4_listing_caps_entries_and_time(sandbox: LocalSandbox, ws: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_agentbench.paths.walk as workspace

    for i in range(3000):
        (ws / f"f{i:04}.txt").write_text("")
    monkeypatch.setattr(workspace, "LIST_MAX_ENTRIES", 1000)
    capped, _ = call(sandbox, "list_files", {})
    assert capped.data["incomplete"] == "stopped after 1000 entries"
    assert "listing incomplete" in capped.stdout and capped.stdout_truncated
    monkeypatch.setattr(workspace, "LIST_MAX_ENTRIES", 10**6)
    late, _ = call(sandbox, "list_files", {}, tool_timeout_sec=1e-9)
    assert late.data["incomplete"] == "stopped at the time limit"


def under_a_memory_limit(sandbox: LocalSandbox, tool: str, args: dict[str, Any]) -> ToolResult:
    def run() -> ToolResult:
        limit = 2 * 1024**3
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        return Toolbox(sandbox, ToolPolicy()).call(tool, args)

    return bounded(run, seconds=60)[0]


def test_item4_huge_sparse_files_are_read_only_in_a_bounded_prefix(
        sandbox: LocalSandbox, ws: Path) -> None:
    for name in ("big", "big2"):
        with open(ws / name, "wb") as handle:
            handle.truncate(8 * 1024**3)  # sparse: 8 GiB of zeros that cost nothing on disk
    patch = "--- a/big2\n+++ b/big2\n@@ -1 +1 @@\n-a\n+b\n"
    patched = under_a_memory_limit(sandbox, "apply_patch", {"unified_diff": patch})
    assert patched.error_type == "LIMIT_EXCEEDED" and "MiB" in (patched.error_message or "")
    wrote = under_a_memory_limit(sandbox, "write_file", {"path": "big", "content": "x"})
    assert wrote.ok, wrote.error_message
    assert (ws / "big").read_bytes() == b"x"


def test_item4_chown_tree_walks_a_deep_tree_with_fifos(ws: Path, deep_tree: Path) -> None:
    """The Docker adapter chowns the workspace before each sandbox, after the agent's too."""
    from pytest_agentbench.paths.trees import chown_tree

    os.mkfifo(ws / "p")
    os.symlink("/etc", ws / "etc-link")
    before = os.lstat("/etc")

    def chown() -> bool:
        chown_tree(ws, os.getuid(), os.getgid())
        return True

    assert bounded(chown)[0]
    after = os.lstat("/etc")
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)


def test_item4_whole_file_regex_scan_finds_exactly_the_lines_a_per_line_search_finds() -> None:
    """search narrows lines with one timed call per file; the result must equal line by line."""
    import random

    import regex

    import pytest_agentbench.tools.search as tool_search

    rnd = random.Random(8)
    atoms = ["a", "b", " ", ".", r"\s", r"\S", r"\w", r"\W", r"\b", r"\B", "^", "$", "[ab]",
             "[^a]", r"\n", r"\d", "(?:a|b)", "(a)", r"\1", "(?=a)", r"\Z", "(?>a\\s*)"]
    checked = 0
    for _ in range(4000):
        query = "".join(rnd.choice(atoms) + rnd.choice(["", "", "*", "+", "?", "{1,2}"])
                        for _ in range(rnd.randint(1, 4)))
        text = "".join(rnd.choice("ab \nA1\r") for _ in range(rnd.randint(0, 30)))
        try:
            exact = regex.compile(query)
        except regex.error:
            continue
        expected = [(n, line) for n, line in enumerate(text.split("\n"), 1)
                    if exact.search(line)]
        found = list(tool_search._Matcher(query, True).lines("f", text, time.monotonic() + 60))
        assert found == expected, (query, text)
        checked += 1
    assert checked > 2000
