"""Variants: which agent runs and with what parameters; a built-in name or a YAML file.

A variant YAML looks like:

    name: baseline
    agent: llm_v0
    params: {max_steps: 30}
    model: {preset: openrouter, name: anthropic/claude-3.5-sonnet, temperature: 0.2}
    budgets: {max_tokens_total: 200000, max_cost_usd: 1.0, max_wall_sec: 600}

Its config hash (over the resolved content) goes into every attempt record; paired reports and
--agentbench-resume compare it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import yaml

from pytest_agentbench.agents.builtin import BUILTIN_AGENTS

ENTRY_POINT_GROUP = "pytest_agentbench.agents"
VARIANT_KEYS = {"name", "agent", "params", "model", "budgets", "description"}
BUILTIN_VARIANT_DIR = Path(__file__).parent / "variant_files"


class VariantError(Exception):
    pass


@dataclass
class Variant:
    name: str
    agent: str
    params: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    budgets: dict[str, Any] = field(default_factory=dict)
    source: str = "builtin"

    def config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "agent": self.agent,
            "params": self.params,
            "model": self.model,
            "budgets": self.budgets,
        }

    def config_hash(self, extra: dict[str, Any] | None = None) -> str:
        blob = json.dumps({**self.config(), **(extra or {})}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def load_variant(value: str) -> Variant:
    """A built-in agent name, a bundled variant (variant_files/<name>.yaml), or a YAML path."""
    path = Path(value)
    if not path.suffix and (BUILTIN_VARIANT_DIR / f"{value}.yaml").is_file():
        path = BUILTIN_VARIANT_DIR / f"{value}.yaml"
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise VariantError(f"variant file {value}: not found")
        try:
            data = yaml.safe_load(path.read_text("utf-8")) or {}
        except yaml.YAMLError as exc:
            raise VariantError(f"{value}: YAML syntax error: {exc}".splitlines()[0]) from exc
        if not isinstance(data, dict):
            raise VariantError(f"{value}: expected a mapping at the top level")
        unknown = sorted(set(data) - VARIANT_KEYS)
        if unknown:
            raise VariantError(
                f"{value}: {unknown[0]}: unknown key (expected one of "
                f"{', '.join(sorted(VARIANT_KEYS))})"
            )
        if not isinstance(data.get("agent"), str):
            raise VariantError(f"{value}: agent: required, the name of an agent")
        for key in ("params", "model", "budgets"):
            if not isinstance(data.get(key, {}), dict):
                raise VariantError(f"{value}: {key}: expected a mapping")
        return Variant(
            name=str(data.get("name") or path.stem),
            agent=data["agent"],
            params=data.get("params") or {},
            model=data.get("model") or {},
            budgets=data.get("budgets") or {},
            source=str(path),
        )
    return Variant(name=value, agent=value)


def agent_factories(hook_results: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Built-ins, then entry points, then plugin hooks (later sources may not shadow built-ins)."""
    found: dict[str, Any] = dict(BUILTIN_AGENTS)
    try:
        from pytest_agentbench.agents.llm_v0 import LLMAgent

        found["llm_v0"] = LLMAgent
    except ImportError:  # pragma: no cover - the LLM agent is part of the package
        pass
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep.load())
    for result in hook_results or []:
        for name, factory in result.items():
            found.setdefault(name, factory)
    return found


def make_agent(variant: Variant, factories: dict[str, Any]) -> Any:
    if variant.agent not in factories:
        raise VariantError(
            f"unknown agent {variant.agent!r}; known: {', '.join(sorted(factories))}"
        )
    return factories[variant.agent]()
