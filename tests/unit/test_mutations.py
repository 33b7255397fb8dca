"""Mutants of an oracle patch (run/mutations.py, issue 24 item 3): the classic operators, only
on the lines the fix adds, byte-exact elsewhere, and every mutant a patch real git applies."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest
import yaml

from pytest_agentbench.run.adequacy import pick
from pytest_agentbench.run.mutations import MutationError, file_diff, mutants, python_mutations
from pytest_agentbench.tools.patch_parse import parse_patch
from tests.support.tiny_pack import git

ROOT = Path(__file__).resolve().parents[2]
BEFORE = '''\
"""Module docstring with 1 and < inside."""


def check(values, limit=3):
    """Docstring 2."""
    total = 0
    for v in values:
        total += v
    return total
'''
AFTER = '''\
"""Module docstring with 1 and < inside."""


def check(values, limit=3):
    """Docstring 2."""
    total = 0
    for v in values:
        if v <= limit and not v in (None, 0):
            total += v * 2
    label = f"total {total + 1}"
    return total
'''


def _patch(tmp_path: Path, files: dict[str, tuple[str | None, str | None]]) -> tuple[Path, str]:
    """A real repository holding the `before` texts, and git's own diff to the `after` ones."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for path, (before, _) in files.items():
        if before is not None:
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(before)
    (repo / ".keep").write_text("")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "before")
    for path, (_, after) in files.items():
        if after is None:
            (repo / path).unlink()
        else:
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(after)
    git(repo, "add", "-A")
    patch = git(repo, "diff", "--cached") + "\n"
    git(repo, "reset", "-q", "--hard")
    return repo, patch


def _applies(repo: Path, patch: str) -> None:
    proc = subprocess.run(["git", "-C", str(repo), "apply", "--check", "-"], input=patch,
                          text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr + patch


def test_operators_touch_only_the_lines_the_fix_adds(tmp_path: Path) -> None:
    repo, patch = _patch(tmp_path, {"lib/calc.py": (BEFORE, AFTER)})
    made = mutants(patch, {"lib/calc.py": BEFORE})
    whats = {(m.operator, m.what) for m in made}
    assert ("comparison", "`<=` -> `<`") in whats
    assert ("comparison", "`in` -> `not in`") in whats
    assert ("boolean", "`and` -> `or`") in whats
    assert ("boolean", "`not` dropped") in whats
    assert ("condition", "condition negated") in whats
    assert ("arithmetic", "`*` -> `/`") in whats
    assert ("constant", "2 -> 3") in whats and ("constant", "0 -> 1") in whats
    assert ("statement-drop", "`total += v * 2` -> `pass`") in whats
    assert not any(m.operator == "hunk-revert" for m in made)  # one hunk: that is the nop
    for m in made:
        assert m.line in (8, 9, 10), m.label()  # never the docstrings, `total = 0`, `limit=3`
        changed = [line for line in m.patch.splitlines() if line.startswith("+    label")]
        assert changed in ([], ['+    label = f"total {total + 1}"']), m.label()  # f-string
        _applies(repo, m.patch)
        (fp,) = parse_patch(m.patch)
        assert fp.path == "lib/calc.py"
    assert len({m.patch for m in made}) == len(made)
    assert any(m.what.startswith("`label = f") for m in made)  # the statement may go


def test_mutated_text_parses_and_keeps_the_rest_of_the_file_byte_for_byte() -> None:
    text = "x = 'é' ; y = a<b\nz = (a) >= (b)  # é\n"
    for line, _op, _what, mutated in python_mutations(text, {1, 2}):
        ast.parse(mutated)
        kept = [a for a, b in zip(text.splitlines(), mutated.splitlines(), strict=True)
                if a == b]
        assert len(kept) == 1, (line, mutated)  # exactly the mutated line differs
    flips = {m[3] for m in python_mutations(text, {2})}
    assert "x = 'é' ; y = a<b\nz = (a) > (b)  # é\n" in flips


def test_hunk_reverts_when_the_fix_has_several_hunks_and_never_in_tests(tmp_path: Path) -> None:
    before_a, before_b = "A = 1\n", "def f():\n    return 1\n"
    test_before = "def test_f():\n    assert True\n"
    repo, patch = _patch(tmp_path, {
        "pkg/a.py": (before_a, "A = 2\n"),
        "pkg/b.py": (before_b, "def f():\n    return 2\n"),
        "tests/test_b.py": (test_before, "def test_f():\n    assert 2 == 2\n"),
        "pkg/new.py": (None, "N = 5\n"),
        "pkg/gone.txt": ("old\n", None),
    })
    made = mutants(patch, {"pkg/a.py": before_a, "pkg/b.py": before_b,
                           "tests/test_b.py": test_before, "pkg/gone.txt": "old\n"})
    reverts = [m for m in made if m.operator == "hunk-revert"]
    assert {m.path for m in reverts} == {"pkg/a.py", "pkg/b.py", "pkg/new.py", "pkg/gone.txt"}
    assert not any(m.path.startswith("tests/") for m in made)
    for m in made:
        _applies(repo, m.patch)
        assert "tests/test_b.py" in m.patch  # the oracle's other files stay as the oracle's
    assert any(m.path == "pkg/new.py" and m.what == "5 -> 6" for m in made)


def test_a_patch_that_does_not_match_the_files_is_one_error(tmp_path: Path) -> None:
    _, patch = _patch(tmp_path, {"m.py": ("a = 1\n", "a = 2\n")})
    with pytest.raises(MutationError, match="does not match the file"):
        mutants(patch, {"m.py": "b = 1\n"})
    with pytest.raises(MutationError, match="not in the workspace"):
        mutants(patch, {})


def test_no_newline_at_the_end_survives_a_diff(tmp_path: Path) -> None:
    repo, _ = _patch(tmp_path, {"n.py": ("a = 1", "a = 1")})
    _applies(repo, file_diff("n.py", "a = 1", "a = 2"))


@pytest.mark.parametrize("task", ["fix-mean-off-by-one", "fix-parse-size-units",
                                  "fix-title-case-small-words", "restore-slug-module"])
def test_bundled_oracle_patches_give_mutants_git_applies(tmp_path: Path, task: str) -> None:
    spec = yaml.safe_load((ROOT / "taskpacks/custom-dev" / task / "task.yaml").read_text())
    patch = (ROOT / "taskpacks/custom-dev" / task / "oracle.patch").read_text()
    repo = tmp_path / "minilib"
    git(tmp_path, "clone", "-q", str(ROOT / "taskpacks/_shared/minilib.bundle"), str(repo))
    git(repo, "checkout", "-q", spec["repo"]["commit"])
    read = {fp.old_path: (repo / fp.old_path).read_text()
            for fp in parse_patch(patch) if fp.old_path}
    made = mutants(patch, read)
    assert made
    for m in made:
        _applies(repo, m.patch)


def test_pick_spreads_the_cut_over_the_operators(tmp_path: Path) -> None:
    _, patch = _patch(tmp_path, {"lib/calc.py": (BEFORE, AFTER)})
    made = mutants(patch, {"lib/calc.py": BEFORE})
    chosen = pick(made, 5)
    assert len(chosen) == 5 and len({m.operator for m in chosen}) == 5
    assert chosen == sorted(chosen, key=made.index)
    assert pick(made, 100) == made
