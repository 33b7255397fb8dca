"""The run's engine pool and infrastructure retries (run/engine_pool.py, run/infra_retry.py),
with stand-in factories: slots are shared by every process through lock files, workers spread
over the engines, a lost engine is tried last and swept when it comes back, and an attempt whose
engine was lost runs again elsewhere with its earlier try kept, never counted twice."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.run.engine_pool import EnginePlan, EnginePool
from pytest_agentbench.run.infra_retry import run_with_retries


class FakeFactory:
    def __init__(self, name: str) -> None:
        self.name, self.swept = name, []

    def sweep(self, labels: dict[str, str]) -> int:
        self.swept.append(dict(labels))
        return 0

    def close_all(self) -> None:
        pass


def _pool(tmp_path: Path, plans: list[EnginePlan], prefer: int = 0, **kw: Any) -> EnginePool:
    return EnginePool(plans, tmp_path / "slots", prefer=prefer,
                      make_factory=lambda plan: FakeFactory(plan.name), **kw)


A = EnginePlan("a", "default", 1, "bind")
B = EnginePlan("b", "ssh://x", 1, "archive")


def test_workers_spread_over_the_engines(tmp_path: Path) -> None:
    with (_pool(tmp_path, [A, B], prefer=0).lease() as first,
          _pool(tmp_path, [A, B], prefer=1).lease() as second):
        assert {first.engine, second.engine} == {"a", "b"}


def test_a_slot_is_held_across_processes_until_released(tmp_path: Path) -> None:
    """Two pools (two workers) share engine a's one slot: the second waits for the first."""
    taken = threading.Event()
    release = threading.Event()
    got: list[float] = []

    def hold() -> None:
        with _pool(tmp_path, [A]).lease():
            taken.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    assert taken.wait(5)

    def wait_for_it() -> None:
        with _pool(tmp_path, [A]).lease() as lease:
            got.append(time.monotonic())
            assert lease.engine == "a"

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    time.sleep(0.6)
    assert not got, "the second lease did not wait for the slot"
    released = time.monotonic()
    release.set()
    holder.join(5)
    waiter.join(5)
    assert got and got[0] >= released


def test_an_engine_without_slots_never_blocks(tmp_path: Path) -> None:
    free = EnginePlan("free", "default", None, "bind")
    pool = _pool(tmp_path, [free])
    with pool.lease(), pool.lease(), pool.lease() as third:
        assert third.engine == "free"
    assert not (tmp_path / "slots").exists()


def test_excluded_engines_are_not_leased(tmp_path: Path) -> None:
    pool = _pool(tmp_path, [A, B])
    with pool.lease(frozenset({"a"})) as lease:
        assert lease.engine == "b"
    with pytest.raises(ValueError, match="no engine left"), pool.lease(frozenset({"a", "b"})):
        pass


def test_a_lost_engine_is_tried_last_then_swept_when_it_answers(tmp_path: Path) -> None:
    own = {"agentbench.run_id": "r", "agentbench.worker": "gw0"}
    pool = _pool(tmp_path, [A, B], own_labels=own)
    pool.mark_lost("a")
    with pool.lease() as lease:
        assert lease.engine == "b"
    pool.mark_lost("b")  # both lost lately: tried anyway, in the usual order
    with pool.lease() as lease:
        assert lease.engine == "a"
    pool.mark_up("a")
    assert pool.factory("a").swept == [own]
    pool.mark_up("a")  # up already: nothing more to sweep
    assert len(pool.factory("a").swept) == 1


def _record(run_dir: Path, outcome: str, sub: str | None = None) -> dict[str, Any]:
    task_dir = run_dir / "tasks" / "t"
    task_dir.mkdir(parents=True, exist_ok=True)
    (task_dir / "marker.txt").write_text(outcome)
    return {"result": {"passed": outcome == "pass",
                       "failure_reason": None if outcome == "pass" else outcome,
                       "sub_reason": sub, "summary": f"{outcome} {sub}"},
            "artifact_paths": {"task_dir": "tasks/t"}, "duration_sec": 1.5}


def test_a_try_that_lost_its_engine_runs_again_elsewhere(tmp_path: Path) -> None:
    pool = _pool(tmp_path, [A, B])
    tries: list[str] = []

    def run_try(factory: FakeFactory) -> dict[str, Any]:
        tries.append(factory.name)
        if factory.name == "a":
            return _record(tmp_path, "SANDBOX_ERROR", "ENGINE_LOST")
        return _record(tmp_path, "pass")

    record = run_with_retries(pool, 1, run_try, tmp_path)
    assert tries == ["a", "b"]
    assert record["engine"] == "b" and record["result"]["passed"]
    assert [(t["engine"], t["sub_reason"], t["artifacts_dir"]) for t in record["retried"]] == [
        ("a", "ENGINE_LOST", "tasks/t.try1")]
    assert (tmp_path / "tasks" / "t.try1" / "marker.txt").read_text() == "SANDBOX_ERROR"
    assert (tmp_path / "tasks" / "t" / "marker.txt").read_text() == "pass"
    json.dumps(record)  # plain JSON: it rides on the test report to the controller


@pytest.mark.parametrize("retries, engines", [(0, [A, B]), (3, [A])])
def test_no_retry_without_budget_or_another_engine(tmp_path: Path, retries: int,
                                                   engines: list[EnginePlan]) -> None:
    pool = _pool(tmp_path, engines)
    calls = []

    def run_try(factory: FakeFactory) -> dict[str, Any]:
        calls.append(factory.name)
        return _record(tmp_path, "SANDBOX_ERROR", "ENGINE_LOST")

    record = run_with_retries(pool, retries, run_try, tmp_path)
    assert calls == ["a"] and record["retried"] == []
    assert record["result"]["sub_reason"] == "ENGINE_LOST" and record["engine"] == "a"


def test_other_failures_are_never_retried(tmp_path: Path) -> None:
    pool = _pool(tmp_path, [A, B])
    calls = []

    def run_try(factory: FakeFactory) -> dict[str, Any]:
        calls.append(factory.name)
        return _record(tmp_path, "SANDBOX_ERROR", "HARNESS_ERROR")

    assert run_with_retries(pool, 2, run_try, tmp_path)["retried"] == []
    assert calls == ["a"]


def test_a_try_left_by_an_interrupted_session_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "tasks" / "t.try1").mkdir(parents=True)  # an earlier session's, kept
    pool = _pool(tmp_path, [A, B])

    def run_try(factory: FakeFactory) -> dict[str, Any]:
        if factory.name == "a":
            return _record(tmp_path, "SANDBOX_ERROR", "ENGINE_LOST")
        return _record(tmp_path, "pass")

    record = run_with_retries(pool, 1, run_try, tmp_path)
    assert record["retried"][0]["artifacts_dir"] == "tasks/t.try1-2"
    assert (tmp_path / "tasks" / "t.try1-2" / "marker.txt").read_text() == "SANDBOX_ERROR"


def test_an_engine_never_reached_is_not_called_lost() -> None:
    """A SandboxError before the first connection (a provision refusal) is not ENGINE_LOST."""
    from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory

    def never() -> Any:
        raise AssertionError("engine_answers must not connect")

    assert DockerSandboxFactory(transfer="archive", connect=never).engine_answers()
