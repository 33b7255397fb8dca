"""The roles: their names, the tools each may use, the answer each gives (one JSON object, also
offered as a tool so models with native tool calls can answer through it), and the variant's
params (budget shares, prompts, bounds)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pytest_agentbench.agents.llm_config import parse_params
from pytest_agentbench.llm import ModelConfigError
from pytest_agentbench.tools.tool_schemas import TOOL_SCHEMAS

ROUTER, SEARCHER, PATCHER, TESTER = "router", "searcher", "patcher", "tester"
ROLES = (ROUTER, SEARCHER, PATCHER, TESTER)
SPECIALISTS = (SEARCHER, PATCHER, TESTER)
DEFAULT_SHARES: dict[str, float] = {ROUTER: 0.2, SEARCHER: 0.3, PATCHER: 0.3, TESTER: 0.2}
ROUTER_CHOICES = (*SPECIALISTS, "finish", "give_up")


def _answer_tool(name: str, description: str, properties: dict[str, Any],
                 required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required}}}


@dataclass(frozen=True)
class RoleSpec:
    name: str
    work_tools: tuple[str, ...]  # toolbox tools the role may call before answering
    answer: dict[str, Any]  # the answer, as a tool schema
    required: tuple[str, ...]  # keys an answer object must have

    @property
    def answer_name(self) -> str:
        return str(self.answer["function"]["name"])

    def tools(self) -> list[dict[str, Any]]:
        work = [s for s in TOOL_SCHEMAS if s["function"]["name"] in self.work_tools]
        return [*work, self.answer]


_STR = {"type": "string"}
SPECS: dict[str, RoleSpec] = {
    ROUTER: RoleSpec(ROUTER, (), _answer_tool(
        "delegate", "Choose the next action and brief the specialist who does it.",
        {"next": {"type": "string", "enum": list(ROUTER_CHOICES)}, "brief": _STR},
        ["next", "brief"]), ("next",)),
    SEARCHER: RoleSpec(SEARCHER, ("list_files", "read_file", "search"), _answer_tool(
        "report_candidates", "Report the files most likely responsible, with snippets.",
        {"candidates": {"type": "array", "items": {"type": "object", "properties": {
            "path": _STR, "start_line": {"type": "integer"}, "end_line": {"type": "integer"},
            "snippet": _STR, "why": _STR}, "required": ["path"]}},
         "summary": _STR}, ["candidates"]), ("candidates",)),
    PATCHER: RoleSpec(PATCHER, ("read_file", "search"), _answer_tool(
        "propose_patch", "Propose the fix as one unified diff (as `git diff` prints it).",
        {"unified_diff": _STR, "summary": _STR}, ["unified_diff"]), ("unified_diff",)),
    TESTER: RoleSpec(TESTER, ("run",), _answer_tool(
        "recommend", "Recommend, from the test output: done, or retry with a reason.",
        {"recommendation": {"type": "string", "enum": ["done", "retry"]}, "reason": _STR},
        ["recommendation"]), ("recommendation",)),
}


class SubagentParams(BaseModel):
    """The variant's `params:` that only `subagents` reads (llm_v0's, e.g. max_steps and
    max_patch_rejections, are read through LLMParams). Other keys are left alone."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    budget_shares: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_SHARES))
    """Each role's share of `budgets.max_tokens_total` (missing roles keep their default; the
    shares may not add up to more than 1)."""
    prompts: dict[str, str] = Field(default_factory=dict)
    """Per role, a prompt file `llm/prompts/<name>.txt` (default `subagents_<role>_v1`)."""
    max_calls_per_delegation: int = Field(default=4, ge=1)
    """Model calls one specialist delegation may make (tool use, retries of a bad answer)."""
    max_verify_failures: int = Field(default=2, ge=1)
    """A "done" (tester) or "finish" (router) whose check fails is refused; this many refusals
    end the run (AGENT_GAVE_UP / UNVERIFIED_FINISH)."""
    state_chars: int = Field(default=6000, ge=500)
    """Characters of failing output and test output in the router's and specialists' briefs."""
    max_candidates: int = Field(default=8, ge=1)
    snippet_chars: int = Field(default=1500, ge=100)

    @classmethod
    def parse(cls, params: Mapping[str, Any]) -> SubagentParams:
        """ModelConfigError with one line naming the bad param."""
        parsed = parse_params(cls, params)
        for key in (*parsed.budget_shares, *parsed.prompts):
            if key not in ROLES:
                raise ModelConfigError(f"params: unknown role {key!r} (roles: {', '.join(ROLES)})")
        for role, share in parsed.budget_shares.items():
            if not (math.isfinite(share) and 0 < share <= 1):
                raise ModelConfigError(f"params budget_shares.{role}: expected a number in "
                                       f"(0, 1], got {share!r}")
        if sum(parsed.shares().values()) > 1 + 1e-9:
            raise ModelConfigError(f"params budget_shares: the shares add up to "
                                   f"{sum(parsed.shares().values()):.3f}, more than 1")
        return parsed

    def shares(self) -> dict[str, float]:
        return {**DEFAULT_SHARES, **self.budget_shares}

    def prompt_name(self, role: str) -> str:
        return self.prompts.get(role) or f"subagents_{role}_v1"
