"""The context_packer variant's own `params:` (next to llm_v0's, which ignores these keys)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pytest_agentbench.agents.context_pack.plan import PlanParams
from pytest_agentbench.agents.llm_config import parse_params
from pytest_agentbench.llm import ModelConfigError


class ContextPackParamsError(ValueError):
    """A bad value in the variant's params; the message names the field, in one line."""


class ContextPackerParams(BaseModel):
    """A variant's `params:` for context_packer; other keys are llm_v0's or the variant's."""

    model_config = ConfigDict(extra="ignore", frozen=True, use_attribute_docstrings=True)

    context_budget_tokens: int = Field(6000, ge=0)
    """Tokens of code packed into the first observation at most, estimated as characters / 4
    (the failing output and the task text come on top, as in llm_v0)."""
    frame_context_lines: int = Field(30, ge=0)
    """Lines either side of a traceback line when its function is not cheap to show whole."""
    narrow_context_lines: int = Field(8, ge=0)
    """The fallback window around a traceback line when the wide one is over budget."""
    cheap_function_lines: int = Field(80, ge=1)
    """A function at most this long is shown whole around a traceback line."""

    @classmethod
    def parse(cls, params: Mapping[str, Any]) -> ContextPackerParams:
        try:
            return parse_params(cls, params)
        except ModelConfigError as exc:
            raise ContextPackParamsError(str(exc)) from None

    def plan_params(self) -> PlanParams:
        return PlanParams(self.frame_context_lines, self.narrow_context_lines,
                          self.cheap_function_lines)
