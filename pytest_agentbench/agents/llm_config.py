"""llm_v0's configuration: defaults, budgets, the versioned system prompt, a start-up check."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from pytest_agentbench.llm import ModelConfigError, ResolvedModelConfig, resolve_model_config

DEFAULTS: dict[str, Any] = {
    "prompt": "system_v1",  # llm/prompts/<prompt>.txt
    "stuck_after": 4,
    "max_patch_rejections": 3,
    "max_noop": 3,
    "stuck_on": "tests",  # tests: only runs of the test commands (or pytest) | all: every run
    "failing_output_chars": 8000,  # of the baseline output in the first observation
    "observation_chars": 16000,  # per tool result
}


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


def check_config(variant: dict[str, Any], cli: dict[str, Any] | None = None,
                 ) -> ResolvedModelConfig:
    """Resolve and validate a variant's model settings, prompt and API key without calling the
    model, so a run can fail once at start-up instead of in every attempt. `variant` is
    `Variant.config()`; raises ModelConfigError with a one-line message."""
    resolved = resolve_model_config(cli=cli, variant=variant.get("model"))
    resolved.chat_params()  # no model configured
    load_prompt(str((variant.get("params") or {}).get("prompt") or DEFAULTS["prompt"]))
    key, _ = resolved.api_key()
    if key is None and resolved.preset.requires_key:
        raise ModelConfigError(f"preset {resolved.preset.name!r} needs an API key: set one of "
                               + ", ".join(resolved.key_env_names()))
    return resolved


@dataclass
class Budget:
    max_steps: int | None = None
    max_tokens_total: int | None = None
    max_cost_usd: float | None = None
    max_wall_sec: float | None = None

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Budget:
        def num(key: str) -> float | None:
            value = raw.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            return float(value)

        steps, tokens = num("max_steps"), num("max_tokens_total")
        return cls(None if steps is None else int(steps), None if tokens is None else int(tokens),
                   num("max_cost_usd"), num("max_wall_sec"))
