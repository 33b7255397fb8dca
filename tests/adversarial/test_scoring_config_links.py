"""Issue 20 item 4: the pytest-config protection fails closed.

`pyproject.toml` (or `setup.cfg`) that the agent made a symlink (absolute, out-and-back, or one
that stays inside), a FIFO, or a file over the cap used to read as "absent" or as its first
4 MiB, so a pytest section the scoring copy does see went unnoticed and a non-fix PASSED. Now
each of these is a change to the pytest configuration. And the check judges what is scored
(the recorded patch applied to the pre-agent copy), not only what the workspace holds: a patch
whose post-image carries a pytest section is refused even when the workspace shows none (the
planted-object trick of item 1).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pytest_agentbench.core.protection import CONFIG_MAX_BYTES, pytest_config_change
from pytest_agentbench.paths.host_files import HostFiles
from tests.adversarial.test_scoring_forgery import FIX_UNITS
from tests.e2e.test_anticheat import run_scripted

PROJECT = '[project]\nname = "x"\nversion = "1"\n'
EVIL = PROJECT + '\n[tool.pytest.ini_options]\naddopts = "--deselect tests/test_x.py::test_bug"\n'


def trees(tmp_path: Path) -> tuple[Path, Path]:
    """A pre-agent copy and a workspace, both with a pyproject.toml without a pytest section."""
    before, after = tmp_path / "pristine", tmp_path / "workspace"
    for root in (before, after):
        root.mkdir()
        (root / "pyproject.toml").write_text(PROJECT)
    return before, after


def change(before: Path, after: Path, patch: str = "") -> str | None:
    extra = (patch,) if patch else ()  # (the patch argument is new with the fix)
    return pytest_config_change(HostFiles(before), HostFiles(after), ["pyproject.toml"], *extra)


@pytest.mark.parametrize("kind", ["absolute", "out-and-back", "inside"])
def test_a_linked_pyproject_is_a_change(tmp_path: Path, kind: str) -> None:
    """issue 20 item 4: absolute and out-and-back links resolve outside the workspace on the
    host (read as absent: no change seen) but to the agent's file in the scoring container."""
    before, after = trees(tmp_path)
    (after / "pyproject.toml").unlink()
    target = {"absolute": tmp_path / "elsewhere" / "evil.toml",
              "out-and-back": tmp_path / "workspace-in-container" / "evil.toml",
              "inside": after / "cfg" / "evil.toml"}[kind]
    target.parent.mkdir(exist_ok=True)
    target.write_text(EVIL)
    link = str(target) if kind == "absolute" else os.path.relpath(target, after)
    (after / "pyproject.toml").symlink_to(link)
    found = change(before, after)
    assert found and "pyproject.toml" in found and "link" in found


def test_a_fifo_pyproject_is_a_change(tmp_path: Path) -> None:
    """issue 20 item 4: not a regular file: it cannot be judged, so it is not accepted."""
    before, after = trees(tmp_path)
    (after / "pyproject.toml").unlink()
    os.mkfifo(after / "pyproject.toml")
    found = change(before, after)
    assert found and "pyproject.toml" in found


def test_a_pytest_section_past_the_cap_is_a_change(tmp_path: Path) -> None:
    """issue 20 item 4: the file used to be read only up to 4 MiB, so a section after that was
    never seen (a non-fix PASSED on every engine)."""
    before, after = trees(tmp_path)
    filler = "# " + "x" * (CONFIG_MAX_BYTES + 10) + "\n"
    (after / "pyproject.toml").write_text(PROJECT + filler + EVIL[len(PROJECT):])
    found = change(before, after)
    assert found and "pyproject.toml" in found


def test_an_oversized_pre_agent_pyproject_changed_at_all_is_refused(tmp_path: Path) -> None:
    """issue 20 item 4: the same cap on the pre-agent side: never a comparison of two prefixes."""
    before, after = trees(tmp_path)
    big = PROJECT + "# " + "x" * (CONFIG_MAX_BYTES + 10) + "\n"
    (before / "pyproject.toml").write_text(big)
    (after / "pyproject.toml").write_text(big + EVIL[len(PROJECT):])
    assert change(before, after)


def test_the_scored_patch_is_judged_not_only_the_workspace(tmp_path: Path) -> None:
    """issue 20 item 4 (with item 1): the workspace shows the pre-agent pyproject.toml, but the
    patch scoring applies adds a pytest section: that is what the tests run under."""
    before, after = trees(tmp_path)
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    (repo / "pyproject.toml").write_text(PROJECT)
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    (repo / "pyproject.toml").write_text(EVIL)
    patch = subprocess.run([*git, "diff", "--binary"], check=True, capture_output=True,
                           text=True).stdout
    assert change(before, after) is None  # the workspace alone shows nothing
    found = change(before, after, patch)
    assert found and "pytest configuration in pyproject.toml" in found
    # an ordinary edit outside the pytest section still passes through the patch check
    (repo / "pyproject.toml").write_text(PROJECT.replace('"1"', '"2"'))
    benign = subprocess.run([*git, "diff", "--binary"], check=True, capture_output=True,
                            text=True).stdout
    (after / "pyproject.toml").write_text(PROJECT.replace('"1"', '"2"'))
    assert change(before, after, benign) is None


def test_a_patch_that_makes_pyproject_a_link_is_a_change(tmp_path: Path) -> None:
    """issue 20 item 4: the scored copy gets the link from the patch (mode 120000)."""
    before, after = trees(tmp_path)
    patch = ("diff --git a/pyproject.toml b/pyproject.toml\ndeleted file mode 100644\n"
             "--- a/pyproject.toml\n+++ /dev/null\n@@ -1,3 +0,0 @@\n"
             + "".join(f"-{line}\n" for line in PROJECT.splitlines())
             + "diff --git a/pyproject.toml b/pyproject.toml\nnew file mode 120000\n"
             "--- /dev/null\n+++ b/pyproject.toml\n@@ -0,0 +1 @@\n+/workspace/evil.toml\n"
             "\\ No newline at end of file\n")
    found = change(before, after, patch)
    assert found and "pyproject.toml" in found


def test_absolute_link_to_a_pytest_section_does_not_pass_end_to_end(tmp_path: Path) -> None:
    """issue 20 item 4, through pytest and the Docker sandbox: the agent leaves the bug, adds
    the pytest section in a file of its own and links pyproject.toml to it by the container's
    absolute path (outside the workspace on the host). This PASSED before the fix."""
    evil = '[tool.pytest.ini_options]\naddopts = "--deselect tests/test_config.py"\n'
    record = run_scripted(tmp_path, "fix-parse-size-units", [
        {"tool": "run", "arguments": {"command": (
            f"printf '%s' '{evil}' > evil.toml && ln -s \"$PWD/evil.toml\" pyproject.toml && "
            "python -m pytest -q -p no:cacheprovider tests")}},
    ])
    result = record["result"]
    assert result["passed"] is False, result
    assert (result["failure_reason"], result["sub_reason"]) == ("TOOL_ERROR", "EDIT_NOT_ALLOWED")
    assert "pyproject.toml" in result["summary"]


def test_a_fix_with_an_ordinary_pyproject_still_passes_end_to_end(tmp_path: Path) -> None:
    """The other side of issue 20 item 4: a real fix that also adds a pyproject.toml without a
    pytest section (a regular file, judged through the recorded patch) passes."""
    record = run_scripted(tmp_path, "fix-parse-size-units", [
        {"tool": "run", "arguments": {"command": FIX_UNITS}},
        {"tool": "write_file", "arguments": {"path": "pyproject.toml", "content": PROJECT}},
    ])
    assert record["result"]["passed"] is True, record["result"]
