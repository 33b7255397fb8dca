"""The snapshot's one diff (numstat and patch together, core/git_scripts._DIFF_BODY) split on
the host: the same as the two separate diffs git makes, on a real repository with the names
and contents that make numstat and patch differ in form (core/numstat.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_agentbench.core.numstat import parse_numstat_z, split_numstat

DIFF = ["diff", "--no-color", "--no-renames", "--no-ext-diff", "--no-textconv"]


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), "-c", "core.quotePath=false", *args],
                          check=True, capture_output=True).stdout


def trees(repo: Path) -> tuple[str, str]:
    git(repo, "init", "-q")
    (repo / "f.txt").write_text("a\nb\n")
    (repo / "blob.bin").write_bytes(b"\0old\n")
    (repo / "gone.txt").write_text("bye\n")
    git(repo, "add", "-A")
    old = git(repo, "write-tree").decode().strip()
    (repo / "f.txt").write_text("a\nc\nd\n")
    (repo / "blob.bin").write_bytes(b"\0new\nmore\n")
    (repo / "gone.txt").unlink()
    for name in ("sp ace.txt", "tab\tname.txt", "new\nline.txt", "caf\u00e9.txt", 'q"uote.txt'):
        (repo / name).write_text("x\n")
    (repo / "mode.sh").write_text("echo\n")
    (repo / "link").symlink_to("f.txt")
    git(repo, "add", "-A")
    return old, git(repo, "write-tree").decode().strip()


def test_one_diff_splits_into_what_two_diffs_say(tmp_path: Path) -> None:
    old, new = trees(tmp_path)
    patch, numstat = split_numstat(
        git(tmp_path, *DIFF, "--binary", "--numstat", "-z", "-p", old, new))
    assert patch == git(tmp_path, *DIFF, "--binary", old, new)
    assert numstat == git(tmp_path, *DIFF, "--numstat", "-z", old, new)
    files, lines = parse_numstat_z(numstat)
    assert "blob.bin" in files and "new\nline.txt" in files and "tab\tname.txt" in files
    assert lines == 3 + 1 + 5 + 1 + 1  # f.txt, gone.txt, the five names, mode.sh, link


@pytest.mark.parametrize("data", [b"", b"diff --git a/x b/x\n", b"1\t0\tx\0", b"\0\0diff",
                                  b"1\t0\tx\0\0@@ -1 +1 @@\n"])
def test_an_incomplete_diff_is_an_error(data: bytes) -> None:
    with pytest.raises(ValueError, match="no numstat before the patch"):
        split_numstat(data)
