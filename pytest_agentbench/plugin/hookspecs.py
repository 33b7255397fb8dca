"""Hooks other plugins implement to extend agentbench."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_agentbench_agents() -> dict[str, Any]:  # type: ignore[empty-body]
    """Return {name: factory} of agents to offer. `factory(**params)` returns an object with
    `name` and `run(ctx: AgentContext) -> AgentOutcome` (see pytest_agentbench.agents.port)."""
