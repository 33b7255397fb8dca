"""llm_v0's configuration, resolved once per run: its params, budgets, the resolved model
settings and the versioned system prompt (`LLMAgentConfig.resolve`)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_agentbench.llm import ModelConfigError, ResolvedModelConfig, resolve_model_config

ParamsModel = TypeVar("ParamsModel", bound=BaseModel)


class LLMParams(BaseModel):
    """A variant's `params:` for llm_v0. Other keys are left alone (they are the variant's)."""

    model_config = ConfigDict(extra="ignore", frozen=True, use_attribute_docstrings=True)

    prompt: str = "system_v1"
    """The system prompt, `llm/prompts/<prompt>.txt`; its sha256 goes into every record."""
    max_steps: int | None = None
    """Model turns at most; the task's `agent.max_steps` caps it too (unset or <= 0: the
    task's alone)."""
    stuck_after: int = 4
    """Test runs in a row with an unchanged failure signature before AGENT_STUCK."""
    max_patch_rejections: int = 3
    """Rejected patches in a row before TOOL_ERROR / PATCH_REJECTED."""
    max_noop: int = 3
    """Turns without a usable tool call, or edits that changed nothing, in a row before
    AGENT_NO_PROGRESS."""
    max_repeated_errors: int = Field(default=3, ge=1)
    """The identical tool call failing with the identical error this many times in a row before
    AGENT_NO_PROGRESS / REPEATED_TOOL_ERROR (agents/repeats.py)."""
    stuck_on: Literal["tests", "all"] = "tests"
    """Which runs count for `stuck_after`: the test commands (or pytest) only, or every run."""
    failing_output_chars: int = 8000
    """Characters of the baseline's failing output in the first observation."""
    observation_chars: int = 16000
    """Characters of one tool result the model sees."""
    verify_finish: bool = True
    """On `finish`, run the task's failing command (through the toolbox, recorded like any
    call) and refuse the finish while it fails; a passing run of exactly that command by the
    model, with nothing run or edited since, counts as the check."""
    max_unverified_finish: int = Field(default=2, ge=0)
    """Unverified finishes refused with the model sent back to work; one more ends the run
    (AGENT_GAVE_UP / UNVERIFIED_FINISH)."""
    verify_output_chars: int = Field(default=4000, ge=200)
    """Characters of the failing command's output tail shown with a refused finish."""
    prose_code_nudge: bool = True
    """Once per run, answer a reply with a code block and no tool call by pointing at
    apply_patch / write_file (later ones get the plain no-tool-call nudge)."""

    @classmethod
    def parse(cls, params: Mapping[str, Any]) -> LLMParams:
        return parse_params(cls, params)


def parse_params(model: type[ParamsModel], params: Mapping[str, Any]) -> ParamsModel:
    """An agent's params model from a variant's `params:` (a None value means the default);
    ModelConfigError with one line naming the first bad value."""
    try:
        return model.model_validate({k: v for k, v in params.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ModelConfigError(f"params {where}: {first['msg']}") from None


@dataclass(frozen=True)
class Budget:
    """Spending limits, checked before every model call (a variant's `budgets:`)."""

    max_steps: int | None = None
    """Model calls at most (BUDGET_STEPS)."""
    max_tokens_total: int | None = None
    """Prompt plus completion tokens at most, the next call's estimated (BUDGET_TOKENS)."""
    max_cost_usd: float | None = None
    """Reported cost at most, the next call counted as costly as the last (BUDGET_COST)."""
    max_wall_sec: float | None = None
    """Seconds since the agent started, the next call counted as slow as the last
    (BUDGET_WALL)."""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Budget:
        """Numbers only; any other value means no limit."""

        def num(key: str) -> float | None:
            value = raw.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            return float(value)

        steps, tokens = num("max_steps"), num("max_tokens_total")
        return cls(None if steps is None else int(steps), None if tokens is None else int(tokens),
                   num("max_cost_usd"), num("max_wall_sec"))


@dataclass(frozen=True)
class LLMAgentConfig:
    """Everything llm_v0 needs besides the attempt, resolved once per run."""

    params: LLMParams
    budget: Budget
    model: ResolvedModelConfig
    """The model settings (CLI > variant > preset > defaults), with where each came from."""
    prompt: str
    """The system prompt's text."""
    prompt_version: str
    """`<name>@sha256:<hex>` of the prompt file."""

    @classmethod
    def resolve(cls, variant: Mapping[str, Any], cli: Mapping[str, Any] | None = None,
                *, require_key: bool = True) -> LLMAgentConfig:
        """From `Variant.config()` and the CLI's model options, checked without calling the
        model: the settings, the prompt file and the API key (present when the preset needs
        one, unless `require_key` is False: a replay from a cassette calls no model; the key
        itself is read again for each client). Raises ModelConfigError with a one-line
        message."""
        params = LLMParams.parse(variant.get("params") or {})
        model = resolve_model_config(cli=cli, variant=variant.get("model"))
        model.chat_params()  # no model configured
        prompt, version = load_prompt(params.prompt)
        key, _ = model.api_key()
        if key is None and model.preset.requires_key and require_key:
            raise ModelConfigError(f"preset {model.preset.name!r} needs an API key: set one of "
                                   + ", ".join(model.key_env_names()))
        return cls(params, Budget.from_dict(variant.get("budgets") or {}), model, prompt,
                   version)


def load_prompt(name: str) -> tuple[str, str]:
    """(text, version) of `llm/prompts/<name>.txt`; version is `<name>@sha256:<hex>`."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ModelConfigError(f"prompt {name!r}: expected a prompt file name like system_v1")
    res = resources.files("pytest_agentbench.llm").joinpath("prompts").joinpath(f"{name}.txt")
    try:
        data = res.read_bytes()
    except FileNotFoundError:
        raise ModelConfigError(f"prompt {name!r}: no llm/prompts/{name}.txt") from None
    return data.decode("utf-8"), f"{name}@sha256:{hashlib.sha256(data).hexdigest()}"
