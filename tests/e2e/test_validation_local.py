"""The oracle+nop validation (run/validation.py) of the doctor's hello task in the local
sandbox: the whole path that `agentbench doctor` and `validate-tasks --run` share (attempt
factory, AttemptPipeline, oracle and nop, the acceptance rules) without Docker."""

from __future__ import annotations

from pytest_agentbench.cli.doctor_task import hello_task
from pytest_agentbench.run.factory import sandbox_factory
from pytest_agentbench.run.hostenv import owner_uid


def test_the_doctors_hello_task_validates_in_the_local_sandbox() -> None:
    ok, detail = hello_task(sandbox_factory("local"), "local", owner_uid("local"))
    assert ok, detail
    assert "oracle passed" in detail and "nop failed with TESTS_FAILED" in detail
