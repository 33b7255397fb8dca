"""agent_builder: the variant checked once per run, then a fresh agent per attempt, made with its
configuration; third-party factories in the new form (params as keyword arguments) and the old
one (no arguments, the agent reads ctx.params)."""

from __future__ import annotations

from typing import Any

import pytest

import pytest_agentbench.agents.variants as variants
from pytest_agentbench.agents.builtin import NopAgent, ScriptedAgent
from pytest_agentbench.agents.llm_config import LLMAgentConfig
from pytest_agentbench.agents.llm_v0 import LLMAgent
from pytest_agentbench.agents.port import AgentContext, AgentOutcome
from pytest_agentbench.agents.variants import Variant, VariantError, agent_builder


class NewForm:
    name = "new-form"

    def __init__(self, *, depth: int = 1, style: str = "plain") -> None:
        self.depth, self.style = depth, style

    def run(self, ctx: AgentContext) -> AgentOutcome:
        return AgentOutcome("done")


class OldForm:
    name = "old-form"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        return AgentOutcome("done", summary=str(ctx.params.get("depth")))


class FakeEntryPoint:
    def __init__(self, name: str, factory: Any) -> None:
        self.name, self.factory = name, factory

    def load(self) -> Any:
        return self.factory


def test_entry_points_are_scanned_once_per_run_and_each_attempt_gets_a_fresh_agent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    scans: list[str] = []

    def entry_points(group: str) -> list[FakeEntryPoint]:
        scans.append(group)
        return [FakeEntryPoint("new-form", NewForm)]

    monkeypatch.setattr(variants, "entry_points", entry_points)
    build = agent_builder(Variant("v", "new-form", params={"depth": 3}))
    agents = [build() for _ in range(3)]
    assert scans == [variants.ENTRY_POINT_GROUP]
    assert len({id(a) for a in agents}) == 3
    assert all(isinstance(a, NewForm) and a.depth == 3 for a in agents)


def test_a_factory_gets_the_params_it_takes_else_none_as_before() -> None:
    hooks = [{"new-form": NewForm, "old-form": OldForm}]
    made = agent_builder(Variant("v", "new-form", params={"style": "terse"}),
                         extra_factories=hooks)()
    assert isinstance(made, NewForm) and (made.depth, made.style) == (1, "terse")
    # params it does not take: made the old way (it reads ctx.params), as before agent_builder
    made = agent_builder(Variant("v", "new-form", params={"colour": "red"}),
                         extra_factories=hooks)()
    assert isinstance(made, NewForm) and made.style == "plain"
    made = agent_builder(Variant("v", "old-form", params={"depth": 2}), extra_factories=hooks)()
    assert isinstance(made, OldForm)
    script = agent_builder(Variant("v", "scripted", params={"script": "s.yaml"}))()
    assert isinstance(script, ScriptedAgent) and script.script == "s.yaml"


def test_hooks_may_not_shadow_a_builtin_and_unmakeable_factories_fail_up_front() -> None:
    made = agent_builder(Variant("nop", "nop"), extra_factories=[{"nop": OldForm}])()
    assert isinstance(made, NopAgent)

    def needs(model: str) -> OldForm:
        return OldForm()

    with pytest.raises(VariantError, match="^variant v: agent 'needy' cannot be made"):
        agent_builder(Variant("v", "needy"), extra_factories=[{"needy": needs}])
    with pytest.raises(VariantError, match="^variant v: unknown agent 'nobody'; agents: .*nop"):
        agent_builder(Variant("v", "nobody"))


def test_a_typo_names_the_closest_agent_or_bundled_variant() -> None:
    with pytest.raises(VariantError) as typo:
        agent_builder(Variant("orcale", "orcale"))
    assert "unknown agent 'orcale' (did you mean 'oracle'?)" in str(typo.value)
    from pytest_agentbench.agents.variants import bundled_variants

    assert {"baseline", "local", "context_packer", "subagents"} <= set(bundled_variants())
    assert f"bundled variants: {', '.join(bundled_variants())};" in str(typo.value)
    with pytest.raises(VariantError, match=r"\(did you mean 'baseline'\?\)"):
        agent_builder(Variant("basline", "basline"))


def test_llm_v0_resolves_its_configuration_once_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    real = LLMAgentConfig.resolve

    def counting(variant: Any, cli: Any = None) -> LLMAgentConfig:
        calls.append(dict(variant))
        return real(variant, cli)

    monkeypatch.setattr(LLMAgentConfig, "resolve", counting)
    variant = Variant("local", "llm_v0", params={"max_noop": 5},
                      model={"preset": "local", "name": "m"}, budgets={"max_cost_usd": 0.5})
    build = agent_builder(variant, llm_cli={"temperature": 0.7})
    first, second = build(), build()
    assert len(calls) == 1 and first is not second
    assert isinstance(first, LLMAgent) and isinstance(second, LLMAgent)
    config = first.config
    assert config is not None and config is second.config
    assert config.params.max_noop == 5 and config.budget.max_cost_usd == 0.5
    assert config.model.values["temperature"] == 0.7
    assert config.model.sources["temperature"] == "cli"
    assert config.prompt_version.startswith("system_v1@sha256:")


def test_a_factory_that_names_the_run_dependencies_gets_them_and_no_other_does() -> None:
    from pytest_agentbench.text.redaction import Redactor

    seen: dict[str, Any] = {}

    def wants(*, depth: int = 1, redactor: Any = None, llm_cli: Any = None) -> OldForm:
        seen.update(depth=depth, redactor=redactor, llm_cli=llm_cli)
        return OldForm()

    def kwargs_only(**params: Any) -> OldForm:
        seen.update(kwargs=params)
        return OldForm()

    redactor = Redactor(secrets=["s3cret-value"])
    hooks = [{"wants": wants, "kwargs": kwargs_only}]
    agent_builder(Variant("v", "wants", params={"depth": 2}), extra_factories=hooks,
                  llm_cli={"model": "m"}, redactor=redactor)()
    assert seen == {"depth": 2, "redactor": redactor, "llm_cli": {"model": "m"}}
    agent_builder(Variant("v", "kwargs", params={"depth": 2}), extra_factories=hooks,
                  llm_cli={"model": "m"}, redactor=redactor)()
    assert seen["kwargs"] == {"depth": 2}


@pytest.mark.parametrize(("agent", "params", "field"), [
    ("context_packer", {"context_budget_tokens": -5}, "context_budget_tokens"),
    ("subagents", {"budget_shares": {"router": "lots"}}, "budget_shares"),
    ("subagents", {"prompts": {"router": "no_such_prompt"}}, "no_such_prompt"),
])
def test_a_variants_own_bad_param_stops_the_run_before_it_starts(
    monkeypatch: pytest.MonkeyPatch, agent: str, params: dict, field: str,
) -> None:
    """context_packer's and subagents' own params are checked when the run starts, in one line
    naming the field, not in every attempt."""
    monkeypatch.setenv("AGENTBENCH_API_KEY", "sk-test")
    variant = Variant("v", agent, params=params,
                      model={"base_url": "http://127.0.0.1:9/v1", "name": "m"})
    with pytest.raises(VariantError, match=field) as bad:
        agent_builder(variant)
    assert "\n" not in str(bad.value) and str(bad.value).startswith("variant v: ")
    agent_builder(Variant("v", agent, model=variant.model))  # the defaults are fine
