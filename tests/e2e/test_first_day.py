"""Issue 22 ("a user's first day with their own repository"): the plugin's blockers and its wrong
or misleading answers, each through a real plugin run on a tiny local pack (tests/support/
tiny_pack.py; local sandbox, so no Docker). Each test names the item it guards and failed on the
commit before its fix.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from tests.support.plugin_runs import run_env
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
    run_dirs,
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


def test_resume_takes_the_run_s_own_options(pytester: pytest.Pytester, pack: Pack) -> None:
    """Issue 22 item 6: a resume had to repeat --agentbench-attempts (and the variant), else
    "the configuration differs": the run directory already says what the run is."""
    first = run_suite(pytester, "-k", "good-a", "--agentbench-attempts", "2",
                      "--agentbench-variant", "nop")
    first.assert_outcomes(failed=2)
    run_dir = only_run_dir(pytester)
    again = run(pytester, "--agentbench-resume", str(run_dir))
    text = output(again)
    assert "configuration differs" not in text, text
    again.assert_outcomes(failed=2)  # good-b's two attempts; good-a's are recorded
    records = attempts(run_dir)
    assert sorted((r["task_id"], r["attempt_index"]) for r in records) == [
        ("good-a", 0), ("good-a", 1), ("good-b", 0), ("good-b", 1)], records
    assert {r["variant"] for r in records} == {"nop"}


def test_replay_takes_a_run_name_or_latest(pytester: pytest.Pytester, pack: Pack) -> None:
    """Issue 22 item 6: `agentbench replay --run` took only a directory path, unlike the report
    commands, which take a run name or `latest`."""
    run_suite(pytester, "-k", "good-a", "--agentbench-run-name=first").assert_outcomes(passed=1)
    for name in ("latest", "first"):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest_agentbench.cli.main", "replay", "--run", name,
             "--task", "good-a", "--sandbox", "local", "--taskpacks", str(pack.root)],
            capture_output=True, text=True, timeout=300, cwd=pytester.path)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ctrl_c_prints_the_exact_resume_command(pytester: pytest.Pytester, pack: Pack) -> None:
    """Issue 22 item 6: Ctrl-C printed no resume command. It now prints one that, run as
    printed, finishes the run (the run's own options come from its run.json)."""
    flag = pytester.path / "no-more-sleep"
    slow = pack.task("z-slow", failing=f"test -e {flag} || sleep 60; grep -qx good value.txt")
    assert slow.is_file()
    env = run_env(pytester.path / "home")
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--agentbench-suite", SUITE,
           "--agentbench-sandbox", "local", "--agentbench-attempts", "1"]
    proc = subprocess.Popen(cmd, cwd=pytester.path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        dirs = run_dirs(pytester)
        if dirs and (dirs[0] / "attempts.jsonl").is_file() and len(attempts(dirs[0])) == 2:
            break
        time.sleep(0.2)
    time.sleep(1)  # z-slow's baseline is sleeping
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out
    lines = [line for line in out.splitlines() if line.startswith("to resume: ")]
    assert len(lines) == 1, out
    run_dir = only_run_dir(pytester)
    printed = shlex.split(lines[0].removeprefix("to resume: "))
    assert printed[0] == "pytest" and f"--agentbench-resume={run_dir}" in printed, printed
    assert "--agentbench-suite" not in printed, printed
    flag.write_text("")
    again = subprocess.run([sys.executable, "-m", *printed], cwd=pytester.path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(r["task_id"] for r in attempts(run_dir)) == ["good-a", "good-b", "z-slow"]
