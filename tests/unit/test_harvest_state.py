"""The harvest's state (harvest/state.py): what is decided survives a restart, a line torn by a
crash costs only its own commit, and other options are refused."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_agentbench.harvest.state import STATE, HarvestState, Outcome

# as the pipeline passes them: --setup commands are a tuple
OPTIONS = {"source": "/src", "range": "HEAD", "setup": ("make deps",), "statement": "commit",
           "limits": {"fix_files": 10}}


def opened(root: Path, options: dict[str, object] = OPTIONS, fresh: bool = False
           ) -> HarvestState:
    state = HarvestState(root)
    assert state.open(options, fresh) is None
    return state


def test_a_decided_commit_is_decided_after_a_restart(tmp_path: Path) -> None:
    state = opened(tmp_path)
    state.record(Outcome("a" * 40, "VALIDATED", "done", 3.5, "s-aaaa", "bugfix", True,
                         stage_seconds={"tests": 1.0}))
    state.record(Outcome("b" * 40, "NO_TEST_PART", "filter"))
    again = opened(tmp_path)
    assert set(again.decided) == {"a" * 40, "b" * 40}
    assert again.decided["a" * 40] == state.decided["a" * 40]


def test_a_torn_last_line_costs_only_its_commit(tmp_path: Path) -> None:
    state = opened(tmp_path)
    state.record(Outcome("a" * 40, "VALIDATED", "done"))
    with (tmp_path / STATE).open("a") as fh:
        fh.write('{"sha": "' + "b" * 40 + '", "reas')  # the crash came mid-line
    resumed = opened(tmp_path)
    assert set(resumed.decided) == {"a" * 40}
    resumed.record(Outcome("b" * 40, "NO_FAIL_TO_PASS", "tests"))
    resumed.record(Outcome("c" * 40, "RELEASE", "filter"))
    assert set(opened(tmp_path).decided) == {"a" * 40, "b" * 40, "c" * 40}
    for line in (tmp_path / STATE).read_text().splitlines():
        json.loads(line)


def test_other_options_are_refused_until_fresh(tmp_path: Path) -> None:
    opened(tmp_path).record(Outcome("a" * 40, "VALIDATED", "done"))
    other = {**OPTIONS, "range": "v1..HEAD", "statement": "tests"}
    problem = HarvestState(tmp_path).open(other, fresh=False)
    assert problem is not None and "\n" not in problem
    assert "(range, statement)" in problem and "--fresh" in problem
    fresh = opened(tmp_path, other, fresh=True)
    assert fresh.decided == {}
    assert opened(tmp_path, other).decided == {}
