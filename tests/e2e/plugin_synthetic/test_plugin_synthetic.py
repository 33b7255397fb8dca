"""The pytest plugin on synthetic taskpacks: activation, outcome mapping,
malformed task files, third-party agents. Selection, workers, attempts and quarantine:
test_plugin_selection.py; resume and env snapshots: test_plugin_resume.py.

Every test builds a tiny suite in pytester's directory (a local git repository plus task.yaml
files whose commands are shell one-liners, so an attempt takes milliseconds) and runs pytest in a
subprocess with the local sandbox. Nothing here needs Docker or the bundled taskpacks. Each
test is a whole plugin run (seconds each, half a minute for xdist), hence the e2e tier. The pack
and the run helpers are in tests/support/tiny_pack.py, the `pack` and `standard` fixtures in
this folder's conftest.py.
"""

from __future__ import annotations

import re

import pytest

from tests.support.tiny_pack import (
    SUITE,
    Pack,
    attempts,
    by_task,
    only_run_dir,
    output,
    run,
    run_dirs,
    run_suite,
    sections,
)

# --------------------------------------------------------------------------- activation


def test_inert_without_agentbench_options(pytester: pytest.Pytester, pack: Pack) -> None:
    pack.task("good-a")
    pytester.makepyfile(test_plain="def test_one():\n    assert 1 + 1 == 2\n")
    result = run(pytester)  # --agentbench-sandbox alone does not activate the plugin
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    assert "run dir:" not in result.stdout.str()  # no agentbench terminal section
    result.stdout.no_fnmatch_line("*task.yaml*")  # taskpacks are not collected either
    assert not (pytester.path / "reports").exists()


def test_unknown_suite_is_a_usage_error_naming_the_suites(
    pytester: pytest.Pytester, pack: Pack
) -> None:
    pack.task("good-a")
    pack.task("other-task", suite="zeta")
    result = run(pytester, "--agentbench-suite", "does-not-exist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "no such suite 'does-not-exist'" in err
    assert "existing suites: synth, zeta" in err
    assert "Traceback" not in output(result)
    assert run_dirs(pytester) == []


def test_unknown_variant_is_a_usage_error(pytester: pytest.Pytester, standard: Pack) -> None:
    result = run_suite(pytester, "--agentbench-variant", "missing.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "variant file missing.yaml: not found" in result.stderr.str()
    assert "Traceback" not in output(result)


# --------------------------------------------------------------------------- outcome mapping


def test_oracle_outcomes_and_records(pytester: pytest.Pytester, standard: Pack) -> None:
    result = run_suite(pytester, "-rA")
    result.assert_outcomes(passed=2, errors=1, xfailed=1)
    records = by_task(attempts(only_run_dir(pytester)))
    assert set(records) == {"good-a", "good-b", "already-passes", "flip-flop"}
    assert records["good-a"]["result"]["passed"] is True
    assert records["good-a"]["pytest_outcome"] == "passed"
    bad = records["already-passes"]
    assert bad["result"]["failure_reason"] == "BASELINE_NOT_FAILING"
    assert bad["pytest_outcome"] == "error"
    flaky = records["flip-flop"]
    assert flaky["result"]["failure_reason"] == "BASELINE_FLAKY"
    assert flaky["baseline_validation"]["is_flaky"] is True
    assert [r["exit_code"] for r in flaky["baseline_validation"]["runs"]] == [1, 0]
    assert flaky["quarantined"] == "labelled flaky"
    assert flaky["pytest_outcome"] == "xfailed"
    error_text = sections(result, "ERROR at setup of agentbench task")["already-passes"]
    assert error_text == [
        "BASELINE_NOT_FAILING: failing_command passes before any change (2 runs): true",
        "  artifacts: tasks/already-passes",
    ]


def test_nop_fails_valid_tasks_with_a_short_text(pytester: pytest.Pytester, standard: Pack) -> None:
    result = run_suite(pytester, "--agentbench-variant", "nop", "-k", "good")
    result.assert_outcomes(failed=2)
    failures = sections(result, "agentbench task")
    assert set(failures) == {"good-a", "good-b"}
    for task_id, body in failures.items():
        assert body[0].startswith("TESTS_FAILED: passing_command exited 1"), body
        assert body[1:] == [f"  artifacts: tasks/{task_id}"], body
    assert "Traceback" not in output(result)
    records = attempts(only_run_dir(pytester))
    assert {
        (r["task_id"], r["result"]["failure_reason"], r["pytest_outcome"]) for r in records
    } == {
        ("good-a", "TESTS_FAILED", "failed"),
        ("good-b", "TESTS_FAILED", "failed"),
    }


# --------------------------------------------------------------------------- malformed task files


def test_malformed_task_files_are_one_line_errors(pytester: pytest.Pytester, pack: Pack) -> None:
    good = pack.task("good-a")
    pack.task("good-b")
    text = good.read_text()
    cases = {
        "unknown-key": (text.replace("id: good-a", "id: unknown-key\nagnet: {}"), "agnet"),
        "wrong-type": (
            text.replace("id: good-a", "id: wrong-type").replace(
                "timeout_sec: 120", "timeout_sec: soon"
            ),
            "environment.timeout_sec",
        ),
        "missing-field": (
            re.sub(r"  passing_command: .*\n", "", text.replace("id: good-a", "id: missing-field")),
            "validation.passing_command",
        ),
        "syntax-error": (text.replace("id: good-a", "id: [syntax-error"), "line 3, column 6"),
        # a copy of good-a under another folder: its id is not its folder's name (which also
        # keeps two folders of one suite from ever holding the same task id)
        "zz-copy-of-good-a": (text, "id"),
    }
    for name, (body, _) in cases.items():
        pack.write(name, body)
    result = run_suite(pytester, "-rA")
    result.assert_outcomes(passed=2, errors=len(cases))
    errors = sections(result, "ERROR at setup of invalid task")
    assert set(errors) == set(cases)
    expected_message = {
        "unknown-key": "unknown key (did you mean 'agent'?)",
        "wrong-type": "expected a number, got 'soon'",
        "missing-field": "field required",
        "syntax-error": "YAML syntax error",
        "zz-copy-of-good-a": "'good-a' does not match its directory 'zz-copy-of-good-a'",
    }
    for name, (_, field) in cases.items():
        lines = errors[name]
        assert len(lines) == 1, (name, lines)
        assert lines[0].startswith(f"taskpacks/{SUITE}/{name}/task.yaml: {field}"), lines
        assert expected_message[name] in lines[0], lines
    assert "Traceback" not in output(result)
    records = by_task(attempts(only_run_dir(pytester)))
    assert {k: v["pytest_outcome"] for k, v in records.items()} == {
        "good-a": "passed",
        "good-b": "passed",
        **{name: "error" for name in cases},
    }
    for name in cases:  # each invalid task has its record: TASK_INVALID, the problem, no run
        result_ = records[name]["result"]
        assert result_["failure_reason"] == "TASK_INVALID" and not result_["passed"]
        assert result_["summary"] == errors[name][0], (result_, errors[name])
        assert records[name]["suite"] == SUITE and records[name]["duration_sec"] == 0.0



# --------------------------------------------------------------------------- third-party agents

THIRD_PARTY_CONFTEST = '''
from pytest_agentbench.agents.port import AgentOutcome


class WriteGood:
    name = "write-good"

    def run(self, ctx):
        result = ctx.toolbox.call("write_file", {"path": "value.txt", "content": "good\\n"})
        return AgentOutcome("done", summary=f"wrote: {result.ok}", steps=1)


def pytest_agentbench_agents():
    return {"write-good": WriteGood}
'''


def test_a_plugin_hook_registers_an_agent(pytester: pytest.Pytester, pack: Pack) -> None:
    pack.task("good-a", oracle=False)
    pytester.makeconftest(THIRD_PARTY_CONFTEST)
    result = run_suite(pytester, "--agentbench-variant", "write-good")
    result.assert_outcomes(passed=1)
    (record,) = attempts(only_run_dir(pytester))
    assert record["variant"] == "write-good" and record["agent"]["changed_files"] == ["value.txt"]


def test_unknown_agent_is_a_usage_error(pytester: pytest.Pytester, pack: Pack) -> None:
    pack.task("good-a")
    result = run_suite(pytester, "--agentbench-variant", "no-such-agent")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown agent 'no-such-agent'" in result.stderr.str()
    assert "Traceback" not in output(result)

