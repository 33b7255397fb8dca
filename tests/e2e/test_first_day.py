"""Issue 22 ("a user's first day with their own repository"): the plugin's blockers and its wrong
or misleading answers, each through a real plugin run on a tiny local pack (tests/support/
tiny_pack.py; local sandbox, so no Docker). Each test names the item it guards and failed on the
commit before its fix.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.tiny_pack import (
    ORACLE_PATCH,
    SUITE,
    Pack,
    attempts,
    by_task,
    git,
    only_run_dir,
    output,
    run,
    run_suite,
)


@pytest.fixture
def pack(pytester: pytest.Pytester) -> Pack:
    pack = Pack(pytester.path)
    pack.task("good-a")
    pack.task("good-b")
    return pack


def test_named_run_in_parallel(pytester: pytest.Pytester, pack: Pack) -> None:
    """Issue 22 item 1: `-n 2 --agentbench-run-name=X` ran nothing: the controller made
    reports/runs/X and every worker's settings check then refused the name as taken (exit 4,
    a traceback per worker). The workers take the controller's run; the run is recorded."""
    result = run_suite(pytester, "-n", "2", "--agentbench-run-name=nightly-a")
    text = output(result)
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    result.assert_outcomes(passed=2)
    run_dir = pytester.path / "reports" / "runs" / "nightly-a"
    assert sorted(r["task_id"] for r in attempts(run_dir)) == ["good-a", "good-b"]


BAD_PATCH = ORACLE_PATCH.replace("-bad", "-worse")  # names a line value.txt does not have


@pytest.fixture
def oracle_pack(pytester: pytest.Pytester) -> Pack:
    """A good task, one without oracle.patch, one whose oracle.patch does not apply, and one
    whose task.yaml misspells the patch's name."""
    pack = Pack(pytester.path)
    pack.task("good")
    pack.task("no-patch", oracle=False)
    (pack.task("stale-patch").parent / "oracle.patch").write_text(BAD_PATCH)
    typo = pack.task("typo-path")
    typo.write_text(typo.read_text() + "oracle:\n  patch: oracel.patch\n")
    return pack


def test_oracle_problems_are_the_tasks(pytester: pytest.Pytester, oracle_pack: Pack) -> None:
    """Issue 22 item 3: under the oracle, a missing or non-applying reference solution counted
    as the agent's failure (AGENT_GAVE_UP [NO_ORACLE_PATCH], TOOL_ERROR [PATCH_REJECTED]) in the
    pass rate. It is the task's problem (pytest ERROR, not counted), and a misspelled
    oracle.patch path is refused when the task loads, naming the file that is there."""
    result = run_suite(pytester)
    text = output(result)
    result.assert_outcomes(passed=1, errors=3)
    run_dir = only_run_dir(pytester)
    records = by_task(attempts(run_dir))
    assert records["good"]["result"]["passed"] is True
    for task, sub in (("no-patch", "NO_ORACLE_PATCH"), ("stale-patch", "ORACLE_PATCH_REJECTED")):
        assert records[task]["result"]["failure_reason"] == "TASK_INVALID", records[task]
        assert records[task]["result"]["sub_reason"] == sub, records[task]
    assert records["typo-path"]["result"]["failure_reason"] == "TASK_INVALID"
    assert "oracle.patch" in text and "oracel.patch" in text and "did you mean" in text, text


def test_validate_tasks_names_oracle_problems(pytester: pytest.Pytester,
                                              oracle_pack: Pack) -> None:
    """Issue 22 item 3: static validation said "spec valid" for all three broken oracles."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_agentbench.cli.main", "validate-tasks", "--suite", SUITE,
         "--taskpacks", str(oracle_pack.root)],
        capture_output=True, text=True, timeout=120, cwd=pytester.path)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    invalid = {task: line for line in lines if line.startswith("INVALID")
               for task in ("no-patch", "stale-patch", "typo-path") if f"/{task}/" in line}
    assert sorted(invalid) == ["no-patch", "stale-patch", "typo-path"], proc.stdout
    assert all("oracle.patch" in line for line in invalid.values()), proc.stdout
    assert "does not apply" in invalid["stale-patch"], proc.stdout
    assert any(line.startswith("OK") and "good" in line for line in lines), proc.stdout


BLAMING_AGENT = '''
from pytest_agentbench.agents.port import AgentOutcome
from pytest_agentbench.schemas.taxonomy import Reason


class BlamesTheTask:
    name = "blames-the-task"

    def run(self, ctx):
        return AgentOutcome("error", Reason.TASK_INVALID, "NO_ORACLE_PATCH", "not my fault")


def pytest_agentbench_agents():
    return {"blames-the-task": BlamesTheTask}
'''


def test_only_the_oracle_may_blame_the_task(pytester: pytest.Pytester, pack: Pack) -> None:
    """Issue 22 item 3, failing closed: once the oracle's outcome can blame the task, another
    agent must not use the same door to take its failures out of the pass rate."""
    pytester.makeconftest(BLAMING_AGENT)
    result = run_suite(pytester, "--agentbench-variant", "blames-the-task")
    result.assert_outcomes(failed=2)
    for record in attempts(only_run_dir(pytester)):
        assert record["result"]["failure_reason"] == "AGENT_GAVE_UP", record["result"]
        assert record["result"]["sub_reason"] == "AGENT_BLAMED_TASK", record["result"]


def test_the_space_form_guard_names_every_offending_option(
    pytester: pytest.Pytester, pack: Pack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issue 22 item 7: with several options in the space form, the guard named the first in
    name order (the suite, which is no path and moved nothing); fixing that led to a second
    error about the variant. Now one line names every option whose value moved the rootdir,
    and only those."""
    pytester.makeini("[pytest]\n")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    variant = elsewhere / "v.yaml"
    variant.write_text("name: v\nagent: oracle\n")
    out = tmp_path_factory.mktemp("out-elsewhere")
    result = run(pytester, "--agentbench-suite", SUITE, "--agentbench-variant", str(variant),
                 "--agentbench-out", str(out))
    text = output(result)
    assert result.ret == 4, text
    errors = [line for line in text.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1, text
    assert f"--agentbench-variant={variant}" in errors[0], errors[0]
    assert f"--agentbench-out={out}" in errors[0], errors[0]
    assert "--agentbench-suite" not in errors[0], errors[0]


OWN_TEST = "def test_value():\n    assert open('value.txt').read().strip() in ('bad', 'good')\n"


def test_kept_workspaces_stay_out_of_the_project_s_own_tests(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issue 22 item 5: with --agentbench-keep-workspace under the default output root, a plain
    `pytest` in the project collected the kept copies' tests (reports/runs/<run>/tasks/<id>/
    repo/tests/...) beside its own: "import file mismatch", a red suite. Nothing ignored or
    git-ignored the output root. A real project (its own git repository and tests) is the
    task's repository, as on a user's first day."""
    project = pytester.path
    (project / "tests").mkdir()
    (project / "tests" / "test_core.py").write_text(OWN_TEST)
    (project / "value.txt").write_text("bad\n")
    git(project, "init", "-q")
    git(project, "add", "tests", "value.txt")
    git(project, "commit", "-q", "-m", "the project")
    upstream = tmp_path_factory.mktemp("upstream")
    git(upstream, "clone", "-q", "--bare", str(project), "proj.git")
    pack = Pack(project)
    task = pack.task("own-repo")
    task.write_text(task.read_text().replace("../../_repos/tiny", f"file://{upstream}/proj.git")
                    .replace(pack.commit, git(project, "rev-parse", "HEAD")))
    run_suite(pytester, "--agentbench-keep-workspace").assert_outcomes(passed=1)
    kept = only_run_dir(pytester) / "tasks" / "own-repo" / "repo" / "tests" / "test_core.py"
    assert kept.is_file()
    plain = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert plain.ret == 0, output(plain)
    plain.assert_outcomes(passed=1)
    status = git(project, "status", "--porcelain", "--untracked-files=all")
    assert "reports/" not in status, status
