"""The strict unified-diff parser and all-or-nothing applier (tools/patching.py): what a patch
does to files (create, delete, rename, several hunks, newlines, CRLF) and how one is read (plain
patches, kinds, git's diffs). What it refuses or corrects: test_patching_refusals.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_agentbench.tools.patching import PatchError, apply_patch, parse_patch
from tests.support.patch_workspace import TEN, files


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

