"""Issue 11 in a consumer's CI: exit statuses that say what failed, nothing-selected as a usage
error, labels as markers, paths that do not depend on the current directory, run names and
`latest`, and the space form of path options (in-process runs on the tiny local pack)."""

from __future__ import annotations

import os

import pytest

from pytest_agentbench.run.verdict import INFRA_ERROR
from tests.support.run_dirs import run_dirs as dirs_under
from tests.support.tiny_pack import (
    SUITE,
    Pack,
    attempts,
    only_run_dir,
    output,
    run,
    run_dirs,
    run_suite,
)

USAGE_ERROR = 4


@pytest.fixture
def pack(pytester: pytest.Pytester) -> Pack:
    return Pack(pytester.path)


@pytest.fixture
def mixed(pack: Pack) -> Pack:
    """Two valid tasks, one whose baseline already passes (a task problem), one invalid file."""
    pack.task("good-a", labels=("one-line",))
    pack.task("good-b", labels=("multi-file", "skip"))
    pack.task("already-passes", failing="true", oracle=False)
    pack.write("broken", "task_spec_version: 1\nid: broken\n")
    return pack


# --------------------------------------------------------------------------- exit statuses


def test_task_problems_fail_pytest_s_rule_but_not_a_threshold(
    pytester: pytest.Pytester, mixed: Pack
) -> None:
    plain = run_suite(pytester)
    assert plain.ret == 1, output(plain)  # pytest's rule: the two ERRORs fail the session
    gated = run_suite(pytester, "--agentbench-fail-under=1.0")
    text = output(gated)
    assert gated.ret == 0, text
    assert "pass rate 100.0%: 2/2 scored attempts passed" in text
    assert "task problems (not counted against the agent): 2 attempt(s): " \
           "1 BASELINE_NOT_FAILING, 1 TASK_INVALID" in text


def test_the_agent_s_misses_exit_1_under_the_threshold(
    pytester: pytest.Pytester, mixed: Pack
) -> None:
    nop = run_suite(pytester, "--agentbench-variant", "nop", "--agentbench-fail-under", "50%")
    text = output(nop)
    assert nop.ret == 1, text
    assert "pass rate 0.0% is below --agentbench-fail-under 0.5: exit 1" in text


def test_a_threshold_out_of_range_is_one_usage_line(pytester: pytest.Pytester, mixed: Pack) -> None:
    result = run_suite(pytester, "--agentbench-fail-under=1.5")
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --agentbench-fail-under: expected a pass rate*1.5*"])
    assert not (pytester.path / "reports").exists()


def test_infrastructure_errors_exit_10_whatever_the_threshold(
    pytester: pytest.Pytester, pack: Pack
) -> None:
    pack.task("good-a")
    # an agent whose sandbox breaks under it: SANDBOX_ERROR, blamed on the infrastructure
    pytester.makeconftest(
        """
from pytest_agentbench.sandbox.port import SandboxError


class EngineGone:
    name = "engine-gone"

    def run(self, ctx):
        raise SandboxError("engine went away")


def pytest_agentbench_agents():
    return {"engine-gone": EngineGone}
"""
    )
    result = run_suite(pytester, "--agentbench-variant", "engine-gone",
                       "--agentbench-fail-under", "0")
    text = output(result)
    assert result.ret == INFRA_ERROR, text
    assert "infrastructure errors: 1 attempt(s) without a result (1 SANDBOX_ERROR)" in text


# --------------------------------------------------------------------------- nothing selected


def test_paths_that_hold_no_task_are_a_usage_error(pytester: pytest.Pytester, mixed: Pack) -> None:
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = run_suite(pytester, "test_plain.py")
    text = output(result)
    assert result.ret == USAGE_ERROR, text
    assert f"ERROR: --agentbench-suite {SUITE}: the paths given (test_plain.py) hold none of " \
           "its tasks" in text
    assert run_dirs(pytester) == [], "an empty run directory was left"


def test_deselecting_every_task_is_a_usage_error(pytester: pytest.Pytester, mixed: Pack) -> None:
    result = run_suite(pytester, "-k", "no-such-task")
    assert result.ret == USAGE_ERROR, output(result)
    assert "deselected all 4 task item(s); nothing ran" in output(result)
    assert run_dirs(pytester) == []


def test_a_resumed_run_with_nothing_left_is_green(pytester: pytest.Pytester, pack: Pack) -> None:
    pack.task("good-a")
    assert run_suite(pytester).ret == 0
    run_dir = only_run_dir(pytester)
    again = run(pytester, f"--agentbench-resume={run_dir}")
    assert again.ret == 0, output(again)
    assert "nothing left to run: all 1 attempt(s) of this run are recorded" in output(again)
    assert run_dir.is_dir() and len(attempts(run_dir)) == 1


def test_a_task_yaml_path_without_the_suite_option_gets_a_hint(
    pytester: pytest.Pytester, mixed: Pack
) -> None:
    result = run(pytester, f"taskpacks/{SUITE}/good-a/task.yaml")
    text = output(result)
    assert result.ret == USAGE_ERROR, text
    assert f"add --agentbench-suite {SUITE}" in text


# --------------------------------------------------------------------------- labels as marks


def test_m_selects_by_label_under_strict_markers(pytester: pytest.Pytester, mixed: Pack) -> None:
    result = run_suite(pytester, "--strict-markers", "-m", "one-line or multi-file")
    text = output(result)
    assert result.ret == 0, text
    result.assert_outcomes(passed=2, deselected=2)
    # a label named like a builtin mark is not a mark: `skip` did not skip good-b
    assert sorted(r["task_id"] for r in attempts(only_run_dir(pytester))) == ["good-a", "good-b"]


# --------------------------------------------------------------------------- paths and names


def test_paths_do_not_depend_on_the_current_directory(
    pytester: pytest.Pytester, mixed: Pack
) -> None:
    pytester.makeini("[pytest]\nagentbench_out = ci-out\n")
    sub = pytester.mkdir("tests")
    os.chdir(sub)
    result = run_suite(pytester, "-k", "good-a")
    assert result.ret == 0, output(result)
    assert not (sub / "ci-out").exists() and not (sub / "reports").exists()
    (made,) = dirs_under(pytester.path / "ci-out")  # the ini's value, against the ini's dir
    assert (pytester.path / "ci-out" / "latest").resolve() == made.resolve()


def test_a_named_run_and_latest(pytester: pytest.Pytester, mixed: Pack) -> None:
    first = run_suite(pytester, "-k", "good-a", "--agentbench-run-name=nightly-1")
    assert first.ret == 0, output(first)
    runs = pytester.path / "reports" / "runs"
    assert (runs / "nightly-1" / "attempts.jsonl").is_file()
    assert (runs / "latest").resolve() == (runs / "nightly-1").resolve()
    assert attempts(runs / "nightly-1")[0]["run_id"] == "nightly-1"
    again = run_suite(pytester, "-k", "good-a", "--agentbench-run-name=nightly-1")
    assert again.ret == USAGE_ERROR
    again.stderr.fnmatch_lines(["ERROR: --agentbench-run-name=nightly-1: *exists*"])
    bad = run_suite(pytester, "--agentbench-run-name=latest")
    assert bad.ret == USAGE_ERROR


def test_the_space_form_works_when_it_leaves_the_rootdir_alone(
    pytester: pytest.Pytester, mixed: Pack
) -> None:
    pytester.makeini("[pytest]\n")
    inside = pytester.mkdir("out-inside")
    result = run_suite(pytester, "-k", "good-a", "--agentbench-out", str(inside))
    assert result.ret == 0, output(result)
    assert len(dirs_under(inside)) == 1


def test_the_space_form_that_moves_the_rootdir_is_one_line(
    pytester: pytest.Pytester, mixed: Pack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    pytester.makeini("[pytest]\n")
    outside = tmp_path_factory.mktemp("elsewhere")
    result = run_suite(pytester, "--agentbench-out", str(outside))
    text = output(result)
    assert result.ret == USAGE_ERROR, text
    errors = [line for line in text.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 1 and f"write --agentbench-out={outside}, with '='" in errors[0], text
    assert "Traceback" not in text and "INTERNALERROR" not in text
    assert list(outside.iterdir()) == [] and run_dirs(pytester) == []


def test_a_bad_typed_ini_value_names_its_key(pytester: pytest.Pytester, mixed: Pack) -> None:
    pytester.makeini("[pytest]\nagentbench_attempts = many\n")
    result = run_suite(pytester)
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: agentbench_attempts (ini): *many*"])


# --------------------------------------------------------------------------- from a cold review


def test_a_resume_keeps_the_whole_run_s_status(pytester: pytest.Pytester, pack: Pack) -> None:
    pack.task("good-a")
    pack.task("good-b")
    nop = ("--agentbench-variant", "nop", "--agentbench-fail-under=1.0")
    first = run_suite(pytester, *nop, "--agentbench-run-name=nopx", "-k", "good-a")
    assert first.ret == 1
    run_dir = pytester.path / "reports" / "runs" / "nopx"
    rest = run(pytester, f"--agentbench-resume={run_dir}", *nop)  # good-b: the rest
    assert rest.ret == 1, output(rest)  # 0/2 over the whole run, not 0/1 of this session
    assert "pass rate 0.0%: 0/2 scored attempts passed" in output(rest)
    nothing_left = run(pytester, f"--agentbench-resume={run_dir}", *nop)
    assert nothing_left.ret == 1, output(nothing_left)  # never green by resuming a red run
    assert "nothing left to run" in output(nothing_left)
    parallel = run(pytester, f"--agentbench-resume={run_dir}", *nop, "-n", "2")
    assert parallel.ret == 1, output(parallel)  # xdist: the controller knows it too
    assert "nothing left to run: all 2 attempt(s)" in output(parallel)


def test_a_threshold_never_hides_a_failing_project_test(
    pytester: pytest.Pytester, pack: Pack
) -> None:
    pack.task("good-a")
    pytester.makepyfile(test_plain="def test_one():\n    assert False\n")
    result = run_suite(pytester, "--agentbench-fail-under=0.5", "test_plain.py",
                       f"taskpacks/{SUITE}")
    text = output(result)
    assert result.ret == 1, text
    assert "1 test(s) outside the suite failed: exit 1" in text


def test_a_test_folder_keeping_a_sample_task_runs_as_usual(
    pytester: pytest.Pytester, mixed: Pack
) -> None:
    sample = pytester.mkdir("tests")
    (sample / "test_a.py").write_text("def test_a():\n    assert True\n")
    (sample / "sample_task").mkdir()
    (sample / "sample_task" / "task.yaml").write_text("task_spec_version: 1\n")
    result = run(pytester, "tests")
    assert result.ret == 0, output(result)
    result.assert_outcomes(passed=1)


def test_a_label_another_plugin_registered_is_no_mark(
    pytester: pytest.Pytester, pack: Pack
) -> None:
    pack.task("good-a", labels=("retried", "one-line"))
    pytester.makeconftest(
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'retried: re-run a failing test (a plugin)')\n"
    )
    listed = run_suite(pytester, "--collect-only", "-q", "-m", "retried")
    assert "good-a" not in output(listed)  # the plugin's mark was not put on the task
    assert run_suite(pytester, "--collect-only", "-q", "-m", "one-line").ret == 0


def test_the_space_form_of_any_option_is_checked(
    pytester: pytest.Pytester, mixed: Pack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    pytester.makeini("[pytest]\n")
    bundle = tmp_path_factory.mktemp("certs") / "ca.pem"
    bundle.write_text("not a certificate\n")
    result = run_suite(pytester, "--collect-only", "--agentbench-ca-bundle", str(bundle))
    assert result.ret == USAGE_ERROR, output(result)
    assert f"write --agentbench-ca-bundle={bundle}, with '='" in output(result)
