"""Hooks other plugins implement to extend agentbench."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_agentbench.agents.port import AgentFactory


@pytest.hookspec
def pytest_agentbench_agents() -> dict[str, AgentFactory]:  # type: ignore[empty-body]
    """Return {name: factory} of agents to offer; called once per run.

    A factory returns an object with `name` and `run(ctx: AgentContext) -> AgentOutcome` (see
    pytest_agentbench.agents.port). It is called as `factory(**params)` with the variant's
    params when its signature takes them all, else as `factory()` and the agent reads
    `ctx.params`. A factory that names a `redactor` parameter gets the run's Redactor (every
    task's secrets), one that names `llm_cli` the command line's model options. The variant is
    checked once per run, before any attempt."""
