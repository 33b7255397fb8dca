"""Issue 8 item 0 (and the numstat part of item 3, the tool-call part of item 6): the recorded
diff loses no edit and names every changed path exactly.

Each test failed on 4a9ba26, where a snapshot copied `.git/index` (fresh mtime: git's racy check
off; the agent's assume-unchanged and skip-worktree bits, config and ignore rules in force) and
numstat was read without -z:

- a same-size edit in the same second as an index write vanished from the final diff;
- flags, stat config, ignore rules, clean filters and text conversion the agent put in its own
  `.git` (or in .gitignore/.gitattributes) changed what was recorded;
- a C-quoted path (`tests/"q/conftest.py`, a tab in a name) slipped past `readonly_globs`;
- non-UTF-8 content came out of the diff garbled; a nested repository became a gitlink;
- a tool call that raised was missing from `agent/tool_calls.jsonl`.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from pytest_agentbench.core.gitops import SnapshotError
from pytest_agentbench.sandbox.port import SandboxError, SandboxFactory
from pytest_agentbench.tools.toolbox import ToolPolicy
from tests.support.diff_bench import (
    Bench,
    differences,
    tree_state,
)

Kind = tuple[str, SandboxFactory]
FILES: dict[str, bytes | str] = {
    ".gitignore": "*.log\n",
    "src/units.py": "MB = 1000 ** 2\nKB = 1000\n",
    "src/config.py": "def parse(s):\n    return s.lower()\n",
    "tests/test_units.py": "def test_mb():\n    assert True\n",
    "latin.txt": b"caf\xe9\n",
}


def bench_of(kind: Kind, tmp_path: Path, **kwargs: object) -> Bench:
    return Bench(kind[0], kind[1], tmp_path, FILES, **kwargs)  # type: ignore[arg-type]


def assert_scored_equals_workspace(bench: Bench) -> None:
    scored = tree_state(bench.scored_copy())
    found = differences(scored, tree_state(bench.repo))
    assert not found, "final diff applied to the pre-agent copy:\n" + "\n".join(found)


def start_of_a_second() -> None:
    time.sleep(1 - time.time() % 1 + 0.01)


def test_same_size_edit_in_the_second_of_an_index_write_is_recorded(
    sandbox_kind: Kind, tmp_path: Path  # noqa: F811
) -> None:
    """The issue's case: file and index written, then `1000 ** 2` -> `1024 ** 2`, all within
    one second; the final snapshot comes a second later."""
    bench = bench_of(sandbox_kind, tmp_path)
    try:
        for i, name in enumerate(("src/units.py", "src/config.py", "tests/test_units.py")):
            old = (bench.repo / name).read_bytes()
            new = old.replace(b"1000", b"1024") if b"1000" in old else old.swapcase()
            assert len(new) == len(old) and new != old
            start_of_a_second()
            bench.run(f"printf %s '{old.decode()}' > {name} && git update-index -q --refresh && "
                      f"printf %s '{new.decode()}' > {name}")
            if i == 0:  # and once more through the tool API, in place, same size
                same_size = new.decode().replace("KB = 1000", "KB = 1024")
                assert bench.call("write_file", path="src/units.py", content=same_size).ok
        time.sleep(1.2)
        files, _, patch = bench.toolbox.final_diff()
        assert files == ["src/config.py", "src/units.py", "tests/test_units.py"], patch
        assert "+MB = 1024 ** 2" in patch
        assert_scored_equals_workspace(bench)
    finally:
        bench.close()


TAMPERING = {
    "assume-unchanged": "git update-index --assume-unchanged src/units.py && {edit}",
    "skip-worktree": "git update-index --skip-worktree src/units.py && {edit}",
    "checkStat-minimal": "git config core.checkStat minimal && {keep_mtime}",
    "trustctime-false": "git config core.trustctime false && {keep_mtime}",
    "info-exclude": "mkdir -p .git/info && echo 'new.py' >> .git/info/exclude && {new}",
    "excludesFile": "echo '*.py' > .git/x-ignore && "
                    "git config core.excludesFile \"$PWD/.git/x-ignore\" && {new}",
    "agent-gitignore": "printf 'new.py\\n.gitignore\\n' > src/.gitignore && {new}",
    "clean-filter": "git config filter.hide.clean 'sed s/1024/1000/' && "
                    "echo '*.py filter=hide' > .gitattributes && {edit}",
    "text-conversion": "printf '* text\\n' > .gitattributes && printf 'a\\r\\nb\\r\\n' > crlf.txt",
    "binary-attribute": "printf '*.py binary\\n' > .gitattributes && {edit}",
}
EDIT = "printf 'MB = 1024 ** 2\\nKB = 1000\\n' > src/units.py"
KEEP_MTIME = ("t=$(stat -c %y src/units.py) && printf 'MB = 1024 ** 2\\nKB = 1000\\n' > "
              "src/units.py && touch -d \"$t\" src/units.py")
NEW = "printf 'x = 1\\n' > src/new.py"


@pytest.mark.parametrize("trick", TAMPERING.values(), ids=TAMPERING.keys())
def test_what_the_agent_writes_into_git_changes_nothing_recorded(
    sandbox_kind: Kind, tmp_path: Path, trick: str  # noqa: F811
) -> None:
    bench = bench_of(sandbox_kind, tmp_path)
    try:
        time.sleep(1.1)  # the checkout's second is over: no racy entry helps here
        bench.run(trick.format(edit=EDIT, keep_mtime=KEEP_MTIME, new=NEW))
        assert_scored_equals_workspace(bench)
        files, lines, _patch = bench.toolbox.final_diff()
        if "binary" in trick:
            assert lines == 3  # counted as text lines, whatever .gitattributes says
    finally:
        bench.close()


def test_quoted_paths_do_not_escape_readonly_globs(
    sandbox_kind: Kind, tmp_path: Path  # noqa: F811
) -> None:
    policy = ToolPolicy(readonly_globs=["tests/**"], tool_timeout_sec=60)
    bench = bench_of(sandbox_kind, tmp_path, policy=policy)
    try:
        bench.run("mkdir -p 'tests/\"q' && printf 'x\\n' > 'tests/\"q/conftest.py' && "
                  "printf 'y\\n' > \"$(printf 'tests/tab\\tname.py')\" && "
                  "printf 'z\\n' > \"$(printf 'tests/new\\nline.py')\" && "
                  "printf 'w\\n' > \"$(printf 'tests/caf\\303\\251.py')\"")
        files, lines, _ = bench.toolbox.final_diff()
        assert files == ['tests/"q/conftest.py', "tests/café.py", "tests/new\nline.py",
                         "tests/tab\tname.py"]
        assert lines == 4
        violation = bench.toolbox.final_diff_violation()
        assert violation is not None and "read-only" in violation
    finally:
        bench.close()


def test_non_utf8_content_is_recorded_byte_for_byte(
    sandbox_kind: Kind, tmp_path: Path  # noqa: F811
) -> None:
    bench = bench_of(sandbox_kind, tmp_path)
    try:
        bench.run("printf 'caf\\351 cr\\350me\\n' > latin.txt && printf '\\377\\376x' > src/u16.txt"
                  " && printf 'ok\\n' > \"$(printf 'na\\357ve.txt')\"")
        assert_scored_equals_workspace(bench)
    finally:
        bench.close()


@pytest.mark.parametrize("latin", [False, True], ids=["utf-8", "non-utf-8"])
def test_a_binary_file_counts_no_lines_whichever_way_the_patch_is_made(
    sandbox_kind: Kind, tmp_path: Path, latin: bool  # noqa: F811
) -> None:
    """numstat and patch come from one diff, or a numstat of its own before the binary patch
    when the patch is not UTF-8: the same files and counts either way (git's numstat counts a
    binary file's lines as `-`, --text or not, as the two separate diffs before did)."""
    bench = bench_of(sandbox_kind, tmp_path)
    try:
        text = "caf\\351\\n" if latin else "cafe\\n"
        bench.run("printf 'x\\ny\\n' > src/two.txt && printf '" + text + "' > notes.txt")
        assert bench.toolbox.final_diff()[:2] == (["notes.txt", "src/two.txt"], 3)
        bench.run("printf 'a\\0b\\nc\\nd\\n' > blob.bin")
        assert_scored_equals_workspace(bench)
        files, lines, patch = bench.toolbox.final_diff()
        assert files == ["blob.bin", "notes.txt", "src/two.txt"]
        assert lines == 3  # two.txt's 2 and notes.txt's 1; blob.bin's none
        assert "GIT binary patch" in patch
    finally:
        bench.close()


def test_a_step_s_patch_does_not_stay_in_the_sandbox_s_tmp(
    sandbox_kind: Kind, tmp_path: Path  # noqa: F811
) -> None:
    """The snapshot's patch file is emptied once read: a large binary patch would otherwise
    hold the sandbox's /tmp (a tmpfs counted against its memory) until the next diff."""
    bench = bench_of(sandbox_kind, tmp_path)
    gitdir = bench.toolbox.snapshots.gitdir
    try:
        bench.run("head -c 3000000 /dev/urandom > blob.bin")
        sizes = bench.run(f"stat -c %s {gitdir}/patch; true")
        assert sizes.stdout.split() == ["0"], sizes.stdout + sizes.stderr
        assert "blob.bin" in bench.toolbox.final_diff()[0]
    finally:
        bench.close()


@pytest.mark.parametrize("plant", ["ln -sf $PWD/src/config.py {gd}/patch",
                                   "rm -f {gd}/patch && mkfifo {gd}/patch"],
                         ids=["symlink", "fifo"])
def test_a_planted_patch_file_is_a_touched_git_dir(
    sandbox_kind: Kind, tmp_path: Path, plant: str  # noqa: F811
) -> None:
    """The patch file stays in the harness git dir between snapshots: one the agent replaces
    (a link to a workspace file the next diff would write through, a FIFO it would block on)
    changes the fingerprint, so the next snapshot rebuilds the git dir instead of using it."""
    bench = bench_of(sandbox_kind, tmp_path)
    gitdir = bench.toolbox.snapshots.gitdir
    try:
        bench.run(EDIT)
        planted = bench.run(plant.format(gd=gitdir) + f" && {NEW}")
        assert planted.exit_code == 0, planted.stderr
        bench.run("printf 'KB = 1024\\n' >> src/units.py")
        assert bench.toolbox.snapshots.rebuilds == 1
        assert (bench.repo / "src/config.py").read_text() == FILES["src/config.py"]
        assert_scored_equals_workspace(bench)
    finally:
        bench.close()


def test_after_the_git_dir_is_removed_a_step_still_diffs_from_the_last_tree(
    sandbox_kind: Kind, tmp_path: Path  # noqa: F811
) -> None:
    """Each step copies the objects its tree has and the last one has not into the workspace's
    store; the rebuild after the agent removes the harness git dir imports the last tree from
    there, objects written steps apart included, so the step's diff is its own change."""
    bench = bench_of(sandbox_kind, tmp_path)
    gitdir = bench.toolbox.snapshots.gitdir
    try:
        bench.run("mkdir -p src/deep && printf 'a = 1\\n' > src/deep/one.py")
        bench.run("printf 'b = 2\\n' > src/deep/two.py")
        bench.run("printf 'MB = 7\\n' > src/units.py")
        bench.run(f"rm -rf {gitdir} && printf 'c = 3\\n' >> src/deep/one.py")
        bench.run("true")
        assert bench.toolbox.snapshots.rebuilds == 1
        steps = sorted((bench.paths.root / "diffs").glob("step_*.patch"))
        assert len(steps) == 4
        last = steps[-1].read_text()
        assert "+c = 3" in last and "src/deep/one.py" in last
        assert "two.py" not in last and "units.py" not in last  # not a diff from the base
        assert_scored_equals_workspace(bench)
    finally:
        bench.close()


def test_a_nested_repository_is_an_error_not_a_silent_gitlink(
    sandbox_kind: Kind, tmp_path: Path  # noqa: F811
) -> None:
    bench = bench_of(sandbox_kind, tmp_path)
    try:
        bench.run("mkdir vendor && cd vendor && git init -q && printf 'code\\n' > lib.py && "
                  "git add lib.py && git -c user.name=a -c user.email=b commit -qm vendored")
        with pytest.raises(SnapshotError, match="nested git repository"):
            bench.toolbox.final_diff()
    finally:
        bench.close()


def test_mtime_set_back_twice_within_a_second_is_still_seen(
    sandbox_kind: Kind, tmp_path: Path  # noqa: F811
) -> None:
    """A same-size edit whose mtime is put back: within the checkout's second 4a9ba26 missed it
    (ctime equal in whole seconds, mtime equal); a cached index could miss it twice in a row."""
    bench = bench_of(sandbox_kind, tmp_path)
    try:
        for text in ("MB = 1024 ** 2", "MB = 1048 ** 2", "MB = 2048 ** 2"):
            bench.run(f"t=$(stat -c %y src/units.py) && printf '{text}\\nKB = 1000\\n' > "
                      "src/units.py && touch -d \"$t\" src/units.py")
        time.sleep(1.1)
        assert "+MB = 2048 ** 2" in bench.toolbox.final_diff()[2]
        assert_scored_equals_workspace(bench)
    finally:
        bench.close()


def test_the_harness_index_tampered_or_removed_is_rebuilt(
    sandbox_kind: Kind, tmp_path: Path  # noqa: F811
) -> None:
    bench = bench_of(sandbox_kind, tmp_path)
    gitdir = bench.toolbox.snapshots.gitdir
    try:
        # (the harness git dir is bare: without a work tree named, update-index refused, the
        # tampering never happened and neither did the edit)
        tampered = bench.run(f"GIT_DIR={gitdir} GIT_INDEX_FILE={gitdir}/index GIT_WORK_TREE=$PWD "
                             "GIT_OBJECT_DIRECTORY=$PWD/.git/objects "
                             f"git update-index --assume-unchanged src/units.py && {EDIT}")
        assert tampered.exit_code == 0, tampered.stderr
        bench.run(f"rm -rf {gitdir} && printf 'x\\n' > src/new.py")
        assert_scored_equals_workspace(bench)  # the last step's snapshot is taken by then
        assert bench.toolbox.snapshots.rebuilds == 2
    finally:
        bench.close()


def test_a_tool_call_that_raises_is_still_in_tool_calls_jsonl(tmp_path: Path) -> None:
    from pytest_agentbench.sandbox.local import LocalSandboxFactory

    bench = Bench("local", LocalSandboxFactory(), tmp_path, FILES)
    getattr(bench.toolbox, "close", lambda: None)()  # its snapshot dir (in the host's /tmp)
    bench.sandbox.close()  # the sandbox is gone: the next command raises SandboxError
    with pytest.raises(SandboxError):
        bench.call("run", command="kill -9 -1")
    lines = (bench.paths.root / "agent" / "tool_calls.jsonl").read_text("utf-8").splitlines()
    last = json.loads(lines[-1])
    assert last["tool"] == "run" and last["arguments"]["command"] == "kill -9 -1"
    assert last["result"]["ok"] is False
    assert last["result"]["error_type"] == "SANDBOX_ERROR"
    assert "SandboxError" in last["result"]["error_message"]


IGNORE_FILES = {
    ".gitignore": "*.log\n/build/\n!keep.log\ndoc/*.tmp\n\\#hash\ntrail   \nesc\\ \n**/deep/x\n",
    "src/.gitignore": "gen/\n/local.txt\n*.bak\n!important.bak\nsub/*.o\n",
    "src/sub/.gitignore": "!*.o\nonly_here\n",
    "we ird[1]/.gitignore": "*\n!*.keep\n",
}
PROBES = [
    "a.log", "keep.log", "src/keep.log", "build/x", "src/build/x", "doc/a.tmp", "doc/b/a.tmp",
    "#hash", "trail", "esc ", "a/deep/x", "deep/x", "src/gen/f", "src/a/gen/f", "src/local.txt",
    "local.txt", "src/a/local.txt", "src/x.bak", "src/important.bak", "x.bak", "src/sub/a.o",
    "src/sub/b/a.o", "src/sub/only_here", "only_here", "we ird[1]/f", "we ird[1]/f.keep",
    "we ird1/f", "plain.txt",
]


def test_base_ignore_rules_translate_to_what_git_ignores(tmp_path: Path) -> None:
    """One exclude file made of the workspace's .gitignore files ignores exactly what git does."""
    from pytest_agentbench.core.gitignore_rules import base_excludes
    from tests.support.diff_bench import git

    git(tmp_path, "init", "-q")
    for name, text in {**IGNORE_FILES, **{p: "x" for p in PROBES}}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    sources = {name.encode(): text.encode() for name, text in IGNORE_FILES.items()}
    (tmp_path / ".git" / "translated").write_bytes(base_excludes(sources))
    by_git = git(tmp_path, "ls-files", "-o", "--exclude-standard")
    ours = git(tmp_path, "ls-files", "-o", "--exclude-from=.git/translated")
    assert sorted(ours.splitlines()) == sorted(by_git.splitlines())
    assert "a.log" not in by_git and "plain.txt" in by_git  # the probes do probe


def test_the_recorded_patch_applies_without_the_workspaces_conversions(
    sandbox_kind: Kind, tmp_path: Path  # noqa: F811
) -> None:
    """A repository whose .gitattributes say `eol=crlf`: the agent's LF file must be scored as
    LF. gitops.apply_command applies byte for byte; plain `git apply` (core/pipeline.py's command
    on 4a9ba26) rewrites it as CRLF."""
    from pytest_agentbench.core.gitops import APPLY_PATCH

    files = {**FILES, ".gitattributes": "*.py text eol=crlf\n", "src/crlf.py": b"a = 1\r\n"}
    bench = Bench(sandbox_kind[0], sandbox_kind[1], tmp_path, files)
    try:
        bench.run("printf 'b = 2\\n' > src/new.py && printf 'a = 1\\r\\nc = 3\\n' > src/crlf.py")
        assert_scored_equals_workspace(bench)
        plain = tmp_path / "plain"
        subprocess.run(["cp", "-a", f"{bench.pristine}/.", str(plain)], check=True)
        (plain / APPLY_PATCH).write_text(bench.toolbox.final_patch, "utf-8")
        sandbox = bench.open(plain)
        try:
            assert sandbox.exec(f"git apply --binary --whitespace=nowarn {APPLY_PATCH}",
                                timeout_sec=60).ok
        finally:
            sandbox.close()
        assert (plain / "src/new.py").read_bytes() == b"b = 2\r\n"  # converted: not the change
    finally:
        bench.close()
