"""The unified-diff applier (tools/patching.py) refusing or correcting: offsets, a hunk that
does not match, all or nothing across files, miscounted hunk headers, paths outside the
workspace, a failed write rolled back."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentbench.paths.files import PathEscape
from pytest_agentbench.paths.host_files import HostFiles
from pytest_agentbench.tools.patching import PatchError, apply_patch, parse_patch
from tests.support.patch_workspace import TEN, files


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
