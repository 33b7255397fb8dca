"""Issue 21: one candidate's harness error is recorded with its reason and the harvest goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pytest_agentbench.harvest.pipeline as pipeline
from pytest_agentbench.harvest.history import Commit
from pytest_agentbench.harvest.state import HarvestState, Outcome


class _Candidate:
    def __init__(self, sha: str) -> None:
        self.commit = Commit(sha, ("p" * 40,), "a <a@a>", "2020-01-01T00:00:00Z", "s", "")


def test_a_candidate_that_raises_is_recorded_and_the_others_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def one(work: Any, candidate: Any) -> Outcome:
        if candidate.commit.sha.startswith("b"):
            raise RuntimeError("a bug in one candidate")
        return Outcome(candidate.commit.sha, "NO_FAIL_TO_PASS", "tests")

    monkeypatch.setattr(pipeline, "_one", one)
    state = HarvestState(tmp_path / "state")
    assert state.open({}, fresh=True) is None
    work: Any = type("W", (), {"options": pipeline.Options("s", "suite", tmp_path, workers=2)})
    lines: list[str] = []
    todo: Any = [_Candidate(c * 40) for c in "abc"]
    pipeline._run_all(work, todo, state, lines.append)
    reasons = {sha[0]: o.reason for sha, o in state.decided.items()}
    assert reasons == {"a": "NO_FAIL_TO_PASS", "b": "HARNESS_ERROR", "c": "NO_FAIL_TO_PASS"}
    assert "a bug in one candidate" in state.decided["b" * 40].detail
    assert len(lines) == 3
