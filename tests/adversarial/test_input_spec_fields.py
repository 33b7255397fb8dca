"""The spec fields that issue 8 adds for the other fixes to consume, with their bounds:
`environment.disk_limit_mb` (the workspace quota), `validation.results` (the evidence scoring
requires) and `agent.protect_test_infra` (test infrastructure read-only by default)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from pytest_agentbench.schemas.task import AgentSpec, EnvironmentSpec, TaskSpec, ValidationSpec


def spec(**sections: dict[str, Any]) -> TaskSpec:
    data: dict[str, Any] = {
        "task_spec_version": 1,
        "id": "t1",
        "suite": "s",
        "repo": {"url": "https://example.invalid/r.git", "commit": "abcdef1"},
        "validation": {"failing_command": "false", "passing_command": "true"},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return TaskSpec.model_validate(data)


def test_defaults() -> None:
    task = spec()
    assert task.environment.disk_limit_mb == 2048
    assert task.validation.results == "auto"
    assert task.agent.protect_test_infra is True


@pytest.mark.parametrize("value", [16, 2048, 1_048_576])
def test_disk_limit_in_bounds(value: int) -> None:
    assert spec(environment={"disk_limit_mb": value}).environment.disk_limit_mb == value


@pytest.mark.parametrize("value", [0, 15, 1_048_577, -1, True, "lots", 1.5, float("inf")])
def test_disk_limit_out_of_bounds(value: Any) -> None:
    with pytest.raises(ValidationError):
        spec(environment={"disk_limit_mb": value})


@pytest.mark.parametrize("value", ["auto", "junit", "exit_code"])
def test_results_values(value: str) -> None:
    assert spec(validation={"results": value}).validation.results == value


@pytest.mark.parametrize("value", ["JUnit", "stdout", "", None, 1])
def test_results_refuses_anything_else(value: Any) -> None:
    with pytest.raises(ValidationError):
        spec(validation={"results": value})


def test_protect_test_infra_opt_out() -> None:
    assert spec(agent={"protect_test_infra": False}).agent.protect_test_infra is False
    with pytest.raises(ValidationError):
        spec(agent={"protect_test_infra": "sometimes"})


def test_new_fields_are_described() -> None:
    fields = (
        EnvironmentSpec.model_fields["disk_limit_mb"],
        ValidationSpec.model_fields["results"],
        AgentSpec.model_fields["protect_test_infra"],
    )
    assert all(field.description for field in fields)
