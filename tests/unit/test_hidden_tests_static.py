"""Hidden tests (`validation.hidden_tests`): the loader's one-line refusals, and the file
sections and paths of a git patch that scoring uses to drop the agent's edits to hidden files."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_agentbench.core.hidden_tests import discard_agent_edits
from pytest_agentbench.tasks.hidden_tests import (
    HiddenTestsError,
    parse_hidden_tests,
    split_sections,
)
from pytest_agentbench.tasks.loader import TaskSpecError, load_task
from tests.support.hidden_pack import make_pack

TASK: dict[str, Any] = {
    "task_spec_version": 1,
    "id": "t1",
    "suite": "s",
    "repo": {"url": "https://example.invalid/repo.git", "commit": "abcdef1"},
    "validation": {"failing_command": "pytest -q", "passing_command": "pytest -q",
                   "hidden_tests": "tests.patch"},
}
PATCH = (
    "diff --git a/tests/test_a.py b/tests/test_a.py\n"
    "--- a/tests/test_a.py\n+++ b/tests/test_a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # problems print paths relative to the current directory


def task_dir(patch: str | None = PATCH, **validation: Any) -> Path:
    data = copy.deepcopy(TASK)
    data["validation"].update(validation)
    path = Path("taskpacks/s/t1/task.yaml")
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(data))
    if patch is not None:
        (path.parent / "tests.patch").write_text(patch)
    return path.parent


def refusal(directory: Path) -> str:
    with pytest.raises(TaskSpecError) as caught:
        load_task(directory / "task.yaml")
    lines = str(caught.value).splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_good_hidden_tests_file_loads() -> None:
    task = load_task(task_dir() / "task.yaml")
    assert task.spec.validation.hidden_tests == "tests.patch"


def test_a_missing_hidden_tests_file_is_one_line() -> None:
    line = refusal(task_dir(patch=None))
    assert line == ("taskpacks/s/t1/task.yaml: validation.hidden_tests: no such file: "
                    "tests.patch")


def test_a_linked_hidden_tests_file_is_refused() -> None:
    directory = task_dir(patch=None)
    (directory / "real.patch").write_text(PATCH)
    os.symlink("real.patch", directory / "tests.patch")  # inside the task dir, still refused
    line = refusal(directory)
    assert line.startswith("taskpacks/s/t1/task.yaml: validation.hidden_tests: ")
    assert "symbolic link" in line


@pytest.mark.parametrize(
    ("patch", "says"),
    [
        ("just some text\n", "not a git patch"),
        ("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n", "not a git patch"),
        (PATCH.replace("tests/test_a.py", "../outside.py"), "leaves the workspace"),
        (PATCH.replace("tests/test_a.py", ".git/hooks/pre-commit"), "not a file of the"),
        ("diff --git a/x b/y z\nGIT binary patch\n", "cannot tell the file name"),
    ],
)
def test_a_hidden_tests_file_that_is_no_usable_git_patch_is_one_line(
    patch: str, says: str
) -> None:
    line = refusal(task_dir(patch=patch))
    assert line.startswith("taskpacks/s/t1/task.yaml: validation.hidden_tests: ")
    assert says in line


def test_a_hidden_tests_path_out_of_the_task_dir_is_refused_by_the_schema() -> None:
    line = refusal(task_dir(hidden_tests="../tests.patch"))
    assert line.startswith("taskpacks/s/t1/task.yaml: validation.hidden_tests: ")
    assert "'..'" in line


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e.invalid", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_sections_name_every_path_of_a_real_git_diff(tmp_path: Path) -> None:
    """Renames (both sides), deletions, additions, binary files, mode changes and names git
    quotes, from git itself; the sections join back to the patch byte for byte."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_old.py").write_text("def test_a():\n    assert 1\n" * 20)
    (repo / "tests" / "gone.txt").write_text("bye\n")
    (repo / "tests" / "run.sh").write_text("echo\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a")
    git(repo, "mv", "tests/test_old.py", "tests/test_renamed.py")
    git(repo, "rm", "-q", "tests/gone.txt")
    (repo / "tests" / "data é \"q\".bin").write_bytes(b"\x00\xff" * 30)
    (repo / "tests" / "run.sh").chmod(0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "b")
    patch = git(repo, "-c", "diff.renames=true", "diff", "--binary", "HEAD~1", "HEAD")
    preamble, sections = split_sections(patch)
    assert preamble + "".join(s.text for s in sections) == patch
    assert parse_hidden_tests("t.patch", patch).paths == (
        'tests/data é "q".bin', "tests/gone.txt", "tests/run.sh", "tests/test_old.py",
        "tests/test_renamed.py",
    )


def test_discarding_drops_only_the_sections_of_hidden_paths() -> None:
    hidden = parse_hidden_tests("t.patch", PATCH)
    fix = PATCH.replace("tests/test_a.py", "src/a.py")
    kept, dropped = discard_agent_edits(fix + PATCH, hidden)
    assert (kept, dropped) == (fix, ["tests/test_a.py"])
    assert discard_agent_edits(fix, hidden) == (fix, [])
    assert discard_agent_edits("", hidden) == ("", [])


def test_the_synthetic_pack_hides_three_paths(tmp_path: Path) -> None:
    pack = make_pack(tmp_path)
    task = load_task(pack.task_dir / "task.yaml")
    text = (pack.task_dir / "tests.patch").read_text()
    assert parse_hidden_tests("tests.patch", text).paths == (
        "tests/data/numbers.bin", "tests/test_calc.py", "tests/test_new.py",
    )
    assert task.spec.repo.commit == pack.parent


def test_an_unterminated_quoted_name_is_an_error() -> None:
    with pytest.raises(HiddenTestsError):
        parse_hidden_tests("t.patch", 'diff --git "a/x b/x\n--- "a/x\n+++ "b/x\n@@ -1 +1 @@\n')
