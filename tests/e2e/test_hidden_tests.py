"""Hidden tests (`validation.hidden_tests`) through the real plugin, on a task made from a
repository's history (tests/support/hidden_pack.py): the test part of the fixing commit is never
in the agent's reach, runs at baseline and scoring, and wins over the agent's edits to its files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.hidden_pack import (
    HIDDEN_PATHS,
    MARKER,
    TEST_CALC_BEFORE,
    HiddenPack,
    make_pack,
    run_variant,
    tool_outputs,
)

# The marker spelled in two halves: the agent's commands never hold it whole, so finding it is
# finding the hidden tests, not the command that looks for them.
FIRST, SECOND = MARKER[:6], MARKER[6:]
LOOK = f'M={FIRST}; M="${{M}}{SECOND}"; '
HITS = "| grep -ac -- \"$M\""
# What an agent can reach: every command prints one count, which must be 0.
WORKSPACE_PROBES = {
    "workspace files": LOOK + 'grep -rlas -- "$M" . | wc -l',
    "git history": LOOK + f"git log --all --reflog -p --binary --format=%H%n%B {HITS}",
    "git objects": LOOK + f"git cat-file --batch-all-objects --batch {HITS}",
    "git names": "git log --all --name-only --format= | grep -c test_new",
    "git object names": "git cat-file --batch-all-objects --batch | grep -ac test_new.py",
    "environment": LOOK + f"env {HITS}",
    "baseline leftovers": "find . -name __pycache__ -o -name .pytest_cache -o -name '*.pyc'"
                          " | wc -l",
}
SANDBOX_PROBES = {
    "env, home and tmp": LOOK + 'grep -rlas -- "$M" /env "$HOME" /tmp | wc -l',
    "the snapshot store": LOOK + "for d in /tmp/.agentbench-git.*; do GIT_DIR=$d "
                                 f"git cat-file --batch-all-objects --batch; done {HITS}",
    "every readable file": LOOK + 'grep -rlas --exclude-dir=proc --exclude-dir=sys -- "$M" / '
                                  "| wc -l",
}
# The probe finds the marker where it is: proof that the probes can fail.
CONTROL = LOOK + 'printf "%s" "$M" > /tmp/probe.txt; grep -rlas -- "$M" /tmp | wc -l'


@pytest.fixture
def pack(tmp_path: Path) -> HiddenPack:
    return make_pack(tmp_path)


def baseline_log(run_dir: Path) -> str:
    (log,) = run_dir.glob("tasks/*/logs/failing_stdout.txt")
    return log.read_text()


@pytest.mark.parametrize("sandbox", ["local", "docker"])
def test_the_oracle_passes_and_nop_fails(tmp_path: Path, pack: HiddenPack, sandbox: str) -> None:
    oracle, oracle_dir = run_variant(tmp_path, pack, "oracle", sandbox)
    assert oracle["result"]["passed"] is True, oracle["result"]
    assert oracle["result"]["hidden_tests_overrode"] == []
    assert oracle["baseline_validation"]["failed_as_expected"] is True
    assert MARKER in baseline_log(oracle_dir)  # the baseline ran the hidden tests
    nop, _ = run_variant(tmp_path, pack, "nop", sandbox)
    assert nop["result"]["failure_reason"] == "TESTS_FAILED", nop["result"]
    assert sorted(s.split(" ", 1)[1] for s in nop["result"]["signature"]) == [
        "tests/test_calc.py::test_add_small", "tests/test_new.py::test_add_data"]


def probe_counts(calls: list[dict[str, Any]], names: list[str]) -> dict[str, str]:
    runs = [c for c in calls if c["tool"] == "run"]
    assert len(runs) == len(names), runs
    return {name: c["result"]["stdout"].strip() for name, c in zip(names, runs, strict=True)}


def tool_api_calls() -> list[dict[str, Any]]:
    return [
        {"tool": "search", "arguments": {"query": MARKER}},
        {"tool": "list_files", "arguments": {}},
        {"tool": "read_file", "arguments": {"path": "tests/test_calc.py"}},
    ]


def check_tool_api(calls: list[dict[str, Any]]) -> None:
    search, listing, read = (c for c in calls if c["tool"] != "run")
    assert search["result"]["ok"] and search["result"]["data"]["matches"] == []
    assert listing["result"]["stdout"].split() == ["calc.py", "tests/test_calc.py"]
    assert read["result"]["stdout"].count("def ") == TEST_CALC_BEFORE.count("def ")
    assert FIRST + SECOND not in read["result"]["stdout"]


def test_an_agent_finds_no_trace_of_the_hidden_tests_under_docker(
    tmp_path: Path, pack: HiddenPack
) -> None:
    probes = {**WORKSPACE_PROBES, **SANDBOX_PROBES}
    calls = [{"tool": "run", "arguments": {"command": c}} for c in probes.values()]
    calls += [{"tool": "run", "arguments": {"command": CONTROL}}, *tool_api_calls()]
    record, run_dir = run_variant(tmp_path, pack, "prober", "docker", calls)
    outputs = tool_outputs(run_dir)
    counts = probe_counts(outputs, [*probes, "control"])
    assert counts.pop("control") == "1", outputs
    assert counts == dict.fromkeys(probes, "0"), outputs
    check_tool_api(outputs)
    assert MARKER in baseline_log(run_dir)
    assert record["result"]["failure_reason"] == "TESTS_FAILED"


def test_an_agent_finds_no_trace_in_its_workspace_on_the_local_sandbox(
    tmp_path: Path, pack: HiddenPack
) -> None:
    """The local sandbox isolates nothing (the host's /tmp and HOME hold the taskpack here),
    so only what the harness hands the agent is searched: the workspace, its git, the tools."""
    calls = [{"tool": "run", "arguments": {"command": c}} for c in WORKSPACE_PROBES.values()]
    calls += tool_api_calls()
    record, run_dir = run_variant(tmp_path, pack, "prober", "local", calls)
    outputs = tool_outputs(run_dir)
    assert probe_counts(outputs, list(WORKSPACE_PROBES)) == dict.fromkeys(WORKSPACE_PROBES, "0")
    check_tool_api(outputs)
    assert record["result"]["failure_reason"] == "TESTS_FAILED"


PASS_ALWAYS = "def test_add_small():\n    assert True\n\n\ndef test_add_data():\n    assert True\n"


def edit_calls(*, fix: bool) -> list[dict[str, Any]]:
    calls = [
        {"tool": "write_file", "arguments": {"path": "tests/test_calc.py", "content": PASS_ALWAYS}},
        {"tool": "write_file", "arguments": {"path": "tests/test_new.py", "content": PASS_ALWAYS}},
        {"tool": "run", "arguments": {"command": "rm -f tests/data/numbers.bin && mkdir -p "
                                                 "tests/data && echo x > tests/data/numbers.bin"}},
    ]
    if fix:
        calls.append({"tool": "write_file", "arguments": {
            "path": "calc.py", "content": "def add(a, b):\n    return a + b\n\n\n"
                                          "def double(a):\n    return a * 2\n"}})
    return calls


def test_an_agent_edit_to_hidden_test_files_is_discarded(tmp_path: Path, pack: HiddenPack) -> None:
    """Tests that always pass, put where the hidden ones go, do not pass a task that is not
    fixed; and the discarding keeps the agent's own fix."""
    record, run_dir = run_variant(tmp_path, pack, "tamper", "local", edit_calls(fix=False))
    result = record["result"]
    assert result["passed"] is False and result["failure_reason"] == "TESTS_FAILED", result
    assert result["hidden_tests_overrode"] == HIDDEN_PATHS
    assert all(c["result"]["ok"] for c in tool_outputs(run_dir))  # edited, not refused
    fixed, _ = run_variant(tmp_path / "fixed", make_pack(tmp_path / "fixed"), "fixer", "local",
                           edit_calls(fix=True))
    assert fixed["result"]["passed"] is True, fixed["result"]
    assert fixed["result"]["hidden_tests_overrode"] == HIDDEN_PATHS


def test_hidden_tests_with_an_env_cache_entry_and_regrades(tmp_path: Path) -> None:
    """The baseline copy and every regrade start from the cache entry's repository, which
    never holds the hidden tests: the oracle still passes every grading, nop still fails."""
    pack = make_pack(tmp_path, setup={"commands": ["python -c 'print(1)'"]})
    oracle, _ = run_variant(tmp_path, pack, "oracle", "local", None, "--agentbench-regrade=1")
    nop, _ = run_variant(tmp_path, pack, "nop", "local", None, "--agentbench-regrade=1")
    assert (oracle["setup"]["env_cache"], nop["setup"]["env_cache"]) == ("built", "hit")
    assert [r["passed"] for r in oracle["result"]["regrades"]] == [True]
    assert oracle["result"]["passed"] is True, oracle["result"]
    assert [r["passed"] for r in nop["result"]["regrades"]] == [False]
    assert nop["result"]["failure_reason"] == "TESTS_FAILED", nop["result"]
