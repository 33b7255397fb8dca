"""Issue 8 item 9 (the --agentbench-out part): an output root where no run directory can be made
is a usage error, one `ERROR:` line naming the option and the problem, exit code 4, no
INTERNALERROR, and nothing created.

On 4a9ba26 each of these ended in an INTERNALERROR traceback (mkdir raising in pytest_configure).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tiny_pack import Pack

USAGE_ERROR = 4


@pytest.fixture
def suite(pytester: pytest.Pytester) -> Path:
    """taskpacks/synth with one trivial task on a local repository."""
    pack = Pack(pytester.path)
    pack.task("one", oracle=False)
    return pack.root


def _entries(root: Path) -> list[str]:
    """What is in pytester's directory, minus the runner's own base temp directories."""
    runner = ("runpytest-", "stdout", "stderr")  # runpytest_subprocess's own files
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(runner))


def _run(pytester: pytest.Pytester, out: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--agentbench-suite", "synth", "--agentbench-sandbox", "local",
        f"--agentbench-out={out}",
    )


def _assert_one_usage_error(result: pytest.RunResult, *words: str) -> str:
    text = result.stdout.str() + "\n" + result.stderr.str()
    assert "INTERNALERROR" not in text, text
    assert "Traceback" not in text, text
    assert result.ret == USAGE_ERROR, text
    errors = [line for line in text.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, text
    line = errors[0]
    assert "--agentbench-out" in line, line
    for word in words:
        assert word in line, line
    return line


def test_out_is_a_file(pytester: pytest.Pytester, suite: Path) -> None:
    target = pytester.path / "afile"
    target.write_text("keep me\n")
    before = _entries(pytester.path)
    line = _assert_one_usage_error(_run(pytester, str(target)), "is a file")
    assert str(target) in line
    assert target.read_text() == "keep me\n"
    assert _entries(pytester.path) == before  # nothing created


def test_out_below_a_file(pytester: pytest.Pytester, suite: Path) -> None:
    target = pytester.path / "afile"
    target.write_text("keep me\n")
    before = _entries(pytester.path)
    _assert_one_usage_error(_run(pytester, f"{target}/runs/deeper"), str(target), "is a file")
    assert target.read_text() == "keep me\n"
    assert _entries(pytester.path) == before


def test_out_in_proc(pytester: pytest.Pytester, suite: Path) -> None:
    before = _entries(pytester.path)
    _assert_one_usage_error(_run(pytester, "/proc/agentbench-x"), "/proc/agentbench-x")
    assert not Path("/proc/agentbench-x").exists()
    assert _entries(pytester.path) == before


def test_a_good_out_dir_still_works(pytester: pytest.Pytester, suite: Path) -> None:
    result = _run(pytester, str(pytester.path / "new" / "runs"))
    assert result.ret in (0, 1), result.stdout.str()
    runs = pytester.path / "new" / "runs"
    index = {"index.html", ".index_cache.json", ".index.lock"}  # the runs index (html_index)
    index |= {".gitignore", ".agentbench-output-root"}  # its marks (issue 22 item 5)
    made = [p for p in runs.iterdir() if p.name != "latest" and p.name not in index]
    assert len(made) == 1 and (runs / "latest").resolve() == made[0].resolve()
    assert {p.name for p in runs.iterdir()} - {"latest", made[0].name} == index
