"""The strict unified-diff parser and all-or-nothing applier (tools/patching.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_agentbench.paths.files import PathEscape
from pytest_agentbench.paths.host_files import HostFiles
from pytest_agentbench.tools.patching import PatchError, apply_patch, parse_patch

TEN = "".join(f"line {i}\n" for i in range(1, 11))


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def files(root: Path) -> HostFiles:
    return HostFiles(root)


def test_modify_single_hunk(ws: Path) -> None:
    (ws / "a.txt").write_text(TEN)
    patch = """\
--- a/a.txt
+++ b/a.txt
@@ -2,3 +2,3 @@
 line 2
-line 3
+LINE THREE
 line 4
"""
    outcome = apply_patch(files(ws), patch)
    assert (ws / "a.txt").read_text() == TEN.replace("line 3\n", "LINE THREE\n")
    assert outcome.changed_files == ["a.txt"]
    assert outcome.modified == ["a.txt"]
    assert (outcome.lines_added, outcome.lines_removed) == (1, 1)
    assert outcome.offsets == []


def test_create_file_in_new_directory(ws: Path) -> None:
    patch = """\
diff --git a/pkg/new.py b/pkg/new.py
new file mode 100644
index 0000000..e69de29
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1,2 @@
+def f():
+    return 1
"""
    outcome = apply_patch(files(ws), patch)
    assert (ws / "pkg" / "new.py").read_text() == "def f():\n    return 1\n"
    assert outcome.created == ["pkg/new.py"]
    assert outcome.changed_files == ["pkg/new.py"]


def test_create_refuses_existing_file(ws: Path) -> None:
    (ws / "x.py").write_text("old\n")
    with pytest.raises(PatchError, match="already exists"):
        apply_patch(files(ws), "--- /dev/null\n+++ b/x.py\n@@ -0,0 +1 @@\n+new\n")
    assert (ws / "x.py").read_text() == "old\n"


def test_delete_requires_the_whole_file(ws: Path) -> None:
    (ws / "gone.txt").write_text("one\ntwo\n")
    partial = "--- a/gone.txt\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-one\n"
    with pytest.raises(PatchError, match="whole file"):
        apply_patch(files(ws), partial)
    assert (ws / "gone.txt").exists()
    full = "--- a/gone.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n"
    outcome = apply_patch(files(ws), full)
    assert not (ws / "gone.txt").exists()
    assert outcome.deleted == ["gone.txt"]
    assert outcome.lines_removed == 2


def test_delete_with_wrong_content_is_rejected(ws: Path) -> None:
    (ws / "gone.txt").write_text("one\ntwo\n")
    with pytest.raises(PatchError) as info:
        apply_patch(files(ws), "--- a/gone.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-TWO\n")
    assert info.value.hunk_index == 1
    assert (ws / "gone.txt").exists()


def test_rename_without_hunks(ws: Path) -> None:
    (ws / "old.py").write_text("x = 1\n")
    patch = """\
diff --git a/old.py b/sub/new.py
similarity index 100%
rename from old.py
rename to sub/new.py
"""
    outcome = apply_patch(files(ws), patch)
    assert not (ws / "old.py").exists()
    assert (ws / "sub" / "new.py").read_text() == "x = 1\n"
    assert outcome.renamed == [("old.py", "sub/new.py")]
    assert outcome.changed_files == ["old.py", "sub/new.py"]


def test_rename_with_hunks(ws: Path) -> None:
    (ws / "old.py").write_text(TEN)
    patch = """\
diff --git a/old.py b/new.py
similarity index 90%
rename from old.py
rename to new.py
index 1111111..2222222 100644
--- a/old.py
+++ b/new.py
@@ -10,1 +10,1 @@
-line 10
+line ten
"""
    apply_patch(files(ws), patch)
    assert not (ws / "old.py").exists()
    assert (ws / "new.py").read_text() == TEN.replace("line 10", "line ten")


def test_multiple_files_and_hunks(ws: Path) -> None:
    (ws / "a.txt").write_text(TEN)
    (ws / "b.txt").write_text("alpha\nbeta\n")
    patch = """\
Some prose the model wrote before the diff.
```diff
--- a/a.txt
+++ b/a.txt
@@ -1,2 +1,3 @@
 line 1
+inserted
 line 2
@@ -9,2 +10,1 @@
 line 9
-line 10
--- a/b.txt
+++ b/b.txt
@@ -2 +2 @@
-beta
+BETA
```
"""
    outcome = apply_patch(files(ws), patch)
    expected = TEN.replace("line 1\n", "line 1\ninserted\n").replace("line 10\n", "")
    assert (ws / "a.txt").read_text() == expected
    assert (ws / "b.txt").read_text() == "alpha\nBETA\n"
    assert outcome.changed_files == ["a.txt", "b.txt"]
    assert (outcome.lines_added, outcome.lines_removed) == (2, 2)


def test_no_newline_at_end_of_file(ws: Path) -> None:
    (ws / "n.txt").write_text("first\nlast")
    patch = """\
--- a/n.txt
+++ b/n.txt
@@ -1,2 +1,3 @@
 first
-last
\\ No newline at end of file
+last
+added
\\ No newline at end of file
"""
    apply_patch(files(ws), patch)
    assert (ws / "n.txt").read_bytes() == b"first\nlast\nadded"


def test_adding_a_trailing_newline(ws: Path) -> None:
    (ws / "n.txt").write_text("only")
    patch = "--- a/n.txt\n+++ b/n.txt\n@@ -1 +1 @@\n-only\n\\ No newline at end of file\n+only\n"
    apply_patch(files(ws), patch)
    assert (ws / "n.txt").read_bytes() == b"only\n"


def test_crlf_file_keeps_crlf_with_an_lf_patch(ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    patch = "--- a/w.txt\n+++ b/w.txt\n@@ -1,3 +1,4 @@\n one\n-two\n+TWO\n+2.5\n three\n"
    apply_patch(files(ws), patch)
    assert (ws / "w.txt").read_bytes() == b"one\r\nTWO\r\n2.5\r\nthree\r\n"


def test_crlf_patch_from_git_round_trips(ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    patch = "--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n one\r\n-two\r\n+deux\r\n"
    apply_patch(files(ws), patch)
    assert (ws / "w.txt").read_bytes() == b"one\r\ndeux\r\n"


def test_offset_within_limit_is_applied_and_reported(ws: Path) -> None:
    (ws / "a.txt").write_text("header\nheader 2\nheader 3\n" + TEN)
    patch = "--- a/a.txt\n+++ b/a.txt\n@@ -5,3 +5,3 @@\n line 5\n-line 6\n+six\n line 7\n"
    outcome = apply_patch(files(ws), patch)
    assert "six\n" in (ws / "a.txt").read_text()
    assert outcome.offsets == [("a.txt", 1, 3)]
    assert "offset +3" in outcome.summary()


def test_offset_beyond_limit_is_rejected_with_a_hint(ws: Path) -> None:
    (ws / "a.txt").write_text("pad\n" * 30 + TEN)
    patch = "--- a/a.txt\n+++ b/a.txt\n@@ -5,3 +5,3 @@\n line 5\n-line 6\n+six\n line 7\n"
    with pytest.raises(PatchError) as info:
        apply_patch(files(ws), patch, max_offset=5)
    assert "at line 35" in info.value.reason
    assert "    35 | line 5" in (info.value.nearest_context or "")


def test_mismatched_hunk_names_file_hunk_and_nearest_context(ws: Path) -> None:
    source = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
    (ws / "calc.py").write_text("# header\n" * 40 + source)
    patch = """\
--- a/calc.py
+++ b/calc.py
@@ -1,1 +1,1 @@
-# header
+# HEADER
@@ -41,2 +41,2 @@
 def add(a, b):
-    return a - c
+    return a + b
"""
    with pytest.raises(PatchError) as info:
        apply_patch(files(ws), patch)
    err = info.value
    assert err.file == "calc.py"
    assert err.hunk_index == 2
    assert err.hunk_header == "@@ -41,2 +41,2 @@"
    assert "return a - c" in err.reason and "return a - b" in err.reason
    assert err.nearest_context is not None
    assert "    41 | def add(a, b):" in err.nearest_context
    assert "    42 |     return a - b" in err.nearest_context
    text = str(err)
    assert "calc.py: hunk #2" in text and "Nearest matching region" in text
    assert (ws / "calc.py").read_text().startswith("# header\n")  # hunk 1 not written either


def test_whitespace_difference_is_not_fuzzed_but_explained(ws: Path) -> None:
    (ws / "a.py").write_text("if x:\n\treturn 1\n")
    patch = "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n if x:\n-    return 1\n+    return 2\n"
    with pytest.raises(PatchError, match="whitespace"):
        apply_patch(files(ws), patch)


def test_all_or_nothing_across_files(ws: Path) -> None:
    (ws / "a.txt").write_text("a\n")
    (ws / "b.txt").write_text("b\n")
    patch = """\
--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-a
+A
--- /dev/null
+++ b/c.txt
@@ -0,0 +1 @@
+c
--- a/b.txt
+++ b/b.txt
@@ -1 +1 @@
-not b
+B
"""
    with pytest.raises(PatchError) as info:
        apply_patch(files(ws), patch)
    assert info.value.file == "b.txt"
    assert (ws / "a.txt").read_text() == "a\n"
    assert not (ws / "c.txt").exists()


def test_miscounted_hunk_headers_are_recounted_from_the_body(ws: Path) -> None:
    """Issue 25 item 8: as `git apply --recount`, a header whose counts do not match its body
    is recounted, the patch applies, and the outcome says which hunk was corrected."""
    (ws / "a.txt").write_text(TEN)
    too_short = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n line 1\n-line 2\n+two\n line 3\n"
    (hunk,) = parse_patch(too_short)[0].hunks
    assert (hunk.old_count, hunk.new_count, hunk.stated_counts) == (3, 3, (2, 2))
    outcome = apply_patch(files(ws), too_short)
    assert (ws / "a.txt").read_text() == TEN.replace("line 2\n", "two\n")
    assert outcome.recounted == [("a.txt", 1, 2, 2, 3, 3)]
    assert "hunk #1: its header said 2 old / 2 new lines, the body has 3 / 3" in outcome.summary()
    # too long, and a second hunk after it: each recounted up to the next header
    two = ("--- a/a.txt\n+++ b/a.txt\n@@ -1,9 +1,9 @@\n line 1\n-two\n+line 2\n"
           "@@ -5,1 +5,7 @@\n line 5\n-line 6\n+six\n line 7\n")
    outcome = apply_patch(files(ws), two)
    assert [r[:2] for r in outcome.recounted] == [("a.txt", 1), ("a.txt", 2)]
    assert (ws / "a.txt").read_text() == TEN.replace("line 6\n", "six\n")
    # a correct header is not reported
    exact = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n line 1\n-line 2\n+two\n"
    assert apply_patch(files(ws), exact).recounted == []


def test_a_miscounted_hunk_that_cannot_be_read_one_way_is_refused(ws: Path) -> None:
    (ws / "a.txt").write_text(TEN)
    no_change = "--- a/a.txt\n+++ b/a.txt\n@@ -1,5 +1,5 @@\n line 1\n line 2\n"
    with pytest.raises(PatchError, match="header says 5 old / 5 new.*2 old.*2 new"):
        parse_patch(no_change)
    with pytest.raises(PatchError, match="malformed hunk header"):
        parse_patch("--- a/a.txt\n+++ b/a.txt\n@@\n-line 1\n+one\n")
    # recounted, but its lines are not in the file: refused as any mismatch, nothing written
    wrong = "--- a/a.txt\n+++ b/a.txt\n@@ -1,1 +1,1 @@\n line 1\n-line 9000\n+x\n"
    with pytest.raises(PatchError):
        apply_patch(files(ws), wrong)
    assert (ws / "a.txt").read_text() == TEN


def test_path_escapes_are_refused(ws: Path) -> None:
    with pytest.raises(PathEscape):
        apply_patch(files(ws), "--- /dev/null\n+++ b/../x\n@@ -0,0 +1 @@\n+evil\n")
    with pytest.raises(PathEscape):
        apply_patch(files(ws), "--- /dev/null\n+++ /etc/evil\n@@ -0,0 +1 @@\n+evil\n")
    assert not (ws.parent / "x").exists()


def test_symlinked_directory_escape_is_refused(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "link").symlink_to(outside)
    with pytest.raises(PathEscape):
        apply_patch(files(ws), "--- /dev/null\n+++ b/link/x\n@@ -0,0 +1 @@\n+evil\n")
    assert not (outside / "x").exists()


def test_check_path_sees_old_and_new_paths_before_any_write(ws: Path) -> None:
    (ws / "old.py").write_text("x\n")
    seen: list[str] = []

    class Refused(Exception):
        pass

    def check(path: str) -> None:
        seen.append(path)
        if path.startswith("protected/"):
            raise Refused(path)

    patch = """\
--- /dev/null
+++ b/ok.py
@@ -0,0 +1 @@
+ok
diff --git a/old.py b/protected/new.py
rename from old.py
rename to protected/new.py
"""
    with pytest.raises(Refused):
        apply_patch(files(ws), patch, check_path=check)
    assert seen == ["ok.py", "old.py", "protected/new.py"]
    assert not (ws / "ok.py").exists() and (ws / "old.py").exists()


def test_plain_patch_without_prefixes_and_with_timestamps(ws: Path) -> None:
    (ws / "f.txt").write_text("x\n")
    patch = "--- f.txt\t2024-01-01 00:00:00\n+++ f.txt\t2024-01-02 00:00:00\n@@ -1 +1 @@\n-x\n+y\n"
    apply_patch(files(ws), patch)
    assert (ws / "f.txt").read_text() == "y\n"


def test_parse_reports_kinds() -> None:
    patch = """\
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+n
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-g
--- a/mod.txt
+++ b/mod.txt
@@ -1 +1 @@
-m
+M
"""
    kinds = [(p.kind, p.path) for p in parse_patch(patch)]
    assert kinds == [("create", "new.txt"), ("delete", "gone.txt"), ("modify", "mod.txt")]


def test_empty_or_garbage_patch_is_rejected() -> None:
    with pytest.raises(PatchError, match="no file changes"):
        parse_patch("I fixed it!")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_round_trip_against_git_diff(tmp_path: Path) -> None:
    """`git diff` output (rename, CRLF, no-newline, create, delete) reproduces git's tree."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(src), *args], check=True, capture_output=True,
                              text=True).stdout

    git("init", "-q")
    (src / "x.txt").write_text(TEN)
    (src / "crlf.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    (src / "nn.txt").write_text("no newline")
    (src / "gone.txt").write_text("bye\n")
    git("add", "-A")
    git("-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qm", "init")
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".git"))
    (src / "x.txt").write_text(TEN.replace("line 3", "LINE 3").replace("line 9", "LINE 9"))
    (src / "crlf.txt").write_bytes(b"one\r\nTWO\r\nthree\r\n")
    (src / "nn.txt").write_text("no newline\nmore")
    (src / "new.txt").write_text("new\n")
    (src / "gone.txt").unlink()
    git("add", "-A")
    git("mv", "x.txt", "y.txt")
    diff = git("diff", "--cached", "-M")
    outcome = apply_patch(files(dst), diff)
    assert outcome.renamed == [("x.txt", "y.txt")]
    for name in ("y.txt", "crlf.txt", "nn.txt", "new.txt"):
        assert (dst / name).read_bytes() == (src / name).read_bytes(), name
    assert not (dst / "x.txt").exists() and not (dst / "gone.txt").exists()


def test_two_sections_for_the_same_file_apply_in_order(ws: Path) -> None:
    (ws / "a.txt").write_text(TEN)
    patch = ("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-line 1\n+one\n"
             "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-line 2\n+two\n")
    outcome = apply_patch(files(ws), patch)
    assert (ws / "a.txt").read_text().startswith("one\ntwo\nline 3\n")
    assert outcome.changed_files == ["a.txt"]


def test_empty_new_file_from_git_header_only(ws: Path) -> None:
    patch = "diff --git a/empty.txt b/empty.txt\nnew file mode 100644\nindex 0000000..e69de29\n"
    outcome = apply_patch(files(ws), patch)
    assert (ws / "empty.txt").read_bytes() == b""
    assert outcome.created == ["empty.txt"]


def test_hunk_line_numbers_start_at_one() -> None:
    with pytest.raises(PatchError, match="start at 1"):
        parse_patch("--- a/a\n+++ b/a\n@@ -0,2 +1,2 @@\n a\n-b\n+c\n")


class FailingSecondWrite(HostFiles):
    """A disk that fails on the second write: the first one must be rolled back."""

    writes = 0

    def write_bytes(self, path: str, data: bytes) -> None:
        self.writes += 1
        if self.writes == 2:
            raise OSError(28, "No space left on device")
        super().write_bytes(path, data)


def test_a_failed_write_rolls_back_earlier_writes(ws: Path) -> None:
    (ws / "a.txt").write_text("a\n")
    (ws / "gone.txt").write_text("g\n")
    patch = ("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n"
             "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-g\n"
             "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+n\n")
    with pytest.raises(OSError, match="No space"):
        apply_patch(FailingSecondWrite(ws), patch)
    assert (ws / "a.txt").read_text() == "a\n"
    assert (ws / "gone.txt").read_text() == "g\n"
    assert not (ws / "new.txt").exists()


def test_the_record_counts_recounted_hunks(tmp_path: Path) -> None:
    """Through the toolbox an agent holds (local sandbox, recording toolbox): the tool's result
    says what it corrected and the attempt's agent stats count the hunk."""
    from pytest_agentbench.sandbox.local import LocalSandboxFactory
    from tests.support.diff_bench import Bench

    bench = Bench("local", LocalSandboxFactory(), tmp_path, {"a.txt": TEN})
    try:
        result = bench.call("apply_patch", unified_diff=(
            "--- a/a.txt\n+++ b/a.txt\n@@ -1,7 +1,7 @@\n line 1\n-line 2\n+two\n"))
        assert result.ok, result.to_observation()
        assert "counts corrected" in result.stdout
        assert bench.toolbox.stats(None).hunks_recounted == 1
    finally:
        bench.close()
