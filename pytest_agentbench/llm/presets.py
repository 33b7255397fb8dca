"""Provider presets and model-config resolution.

Precedence, per value: CLI > variant YAML > preset > code defaults. `resolve_model_config`
returns the values plus `sources`, saying where each one came from, for the attempt record.
API keys come from the environment only (`AGENTBENCH_API_KEY`, then the preset's own variable),
never from files, and are never part of the resolved config.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from pytest_agentbench.llm.base import ChatParams
from pytest_agentbench.llm.client import EventSink, OpenAICompatClient

PRESET_REGISTRY_VERSION = "2025.11.1"  # bump whenever a preset below changes
DEFAULT_PRESET = "openrouter"
GENERIC_KEY_ENV = "AGENTBENCH_API_KEY"
ATTRIBUTION_URL = "https://pypi.org/project/pytest-agentbench/"
ATTRIBUTION_TITLE = "pytest-agentbench"


class ModelConfigError(ValueError):
    """A model setting is missing or has the wrong type; the message names source and key."""


@dataclass(frozen=True)
class Preset:
    name: str
    base_url: str
    key_envs: tuple[str, ...] = ()  # looked up after AGENTBENCH_API_KEY
    requires_key: bool = True
    headers: Mapping[str, str] = field(default_factory=dict)
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)  # overrides CODE_DEFAULTS


_LOCAL_DEFAULTS = {"timeout_sec": 600.0, "max_retries": 2}  # local servers: slow, rarely flaky
PRESETS: dict[str, Preset] = {
    "openrouter": Preset(
        "openrouter", "https://openrouter.ai/api/v1", ("OPENROUTER_API_KEY",),
        # App attribution: HTTP-Referer identifies the app; X-OpenRouter-Title names it
        # (X-Title is the older spelling OpenRouter still accepts).
        headers={"HTTP-Referer": ATTRIBUTION_URL, "X-Title": ATTRIBUTION_TITLE,
                 "X-OpenRouter-Title": ATTRIBUTION_TITLE},
        # Usage accounting incl. `usage.cost`. Newer OpenRouter returns it unasked; older
        # deployments need the opt-in, and it is harmless either way.
        extra_body={"usage": {"include": True}},
    ),
    "openai": Preset("openai", "https://api.openai.com/v1", ("OPENAI_API_KEY",)),
    "vllm": Preset("vllm", "http://127.0.0.1:8000/v1", requires_key=False,
                   defaults=_LOCAL_DEFAULTS),
    "local": Preset("local", "http://127.0.0.1:8000/v1", requires_key=False,
                    defaults=_LOCAL_DEFAULTS),
    "ollama": Preset("ollama", "http://127.0.0.1:11434/v1", requires_key=False,
                     defaults=_LOCAL_DEFAULTS),
}

CODE_DEFAULTS: dict[str, Any] = {
    "model": None, "base_url": None, "temperature": 0.0, "top_p": 1.0, "max_tokens": 4096,
    "seed": None, "timeout_sec": 120.0, "max_retries": 4, "backoff_base_sec": 1.0,
    "backoff_max_sec": 30.0,
}
_FLOATS = {"temperature", "top_p", "timeout_sec", "backoff_base_sec", "backoff_max_sec"}
_INTS = {"max_tokens", "max_retries", "seed"}
_ALIASES = {"name": "model", "provider": "preset"}
_EXTRA_KEYS = {"preset", "headers", "api_key_env"}


@dataclass
class ResolvedModelConfig:
    preset: Preset
    values: dict[str, Any]  # every key of CODE_DEFAULTS
    sources: dict[str, str]  # key -> "cli" | "variant" | "preset:<name>" | "default"
    headers: dict[str, str]
    api_key_env: str | None = None  # an extra variable name to read the key from

    def chat_params(self, **overrides: Any) -> ChatParams:
        if not self.values["model"]:
            raise ModelConfigError("no model configured: set `model` in the variant or on the CLI")
        v = self.values
        return ChatParams(model=v["model"], temperature=v["temperature"], top_p=v["top_p"],
                          max_tokens=v["max_tokens"], seed=v["seed"], **overrides)

    def key_env_names(self) -> list[str]:
        """Where the key may come from; also the names the redactor must scrub."""
        names = [self.api_key_env] if self.api_key_env else []
        return names + [GENERIC_KEY_ENV, *self.preset.key_envs]

    def api_key(self, environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
        """(key, variable name) from the environment, or (None, None)."""
        env = os.environ if environ is None else environ
        for name in self.key_env_names():
            if env.get(name):
                return env[name], name
        return None, None

    def make_client(
        self, on_event: EventSink | None = None, transport: httpx.BaseTransport | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> OpenAICompatClient:
        key, _ = self.api_key(environ)
        if key is None and self.preset.requires_key:
            raise ModelConfigError(f"preset {self.preset.name!r} needs an API key: set one of "
                                   + ", ".join(self.key_env_names()))
        v = self.values
        return OpenAICompatClient(
            v["base_url"], key, self.headers, v["timeout_sec"], v["max_retries"],
            v["backoff_base_sec"], v["backoff_max_sec"], on_event, transport,
            extra_body=self.preset.extra_body,
        )

    def model_info(self) -> dict[str, Any]:
        """The attempt record's `model` block (spec.records.ModelInfo, minus prompt_version)."""
        v = self.values
        return {"provider": self.preset.name, "name": v["model"], "base_url": v["base_url"],
                "temperature": v["temperature"], "top_p": v["top_p"],
                "max_tokens": v["max_tokens"], "seed": v["seed"],
                "preset_registry_version": PRESET_REGISTRY_VERSION,
                "config_sources": dict(self.sources)}


def resolve_model_config(
    cli: Mapping[str, Any] | None = None, variant: Mapping[str, Any] | None = None,
) -> ResolvedModelConfig:
    """Merge CLI values (None = not given) over the variant's model section over the preset over
    CODE_DEFAULTS. Keys: those of CODE_DEFAULTS plus `preset` (alias `provider`), `headers`
    (variant only, merged over the preset's) and `api_key_env`; `name` is an alias of `model`."""
    layers = [("cli", _layer("cli", cli)), ("variant", _layer("variant", variant))]
    preset_name, preset_source = DEFAULT_PRESET, "default"
    for source, layer in layers:
        if layer.get("preset"):
            preset_name, preset_source = str(layer["preset"]), source
            break
    if preset_name not in PRESETS:
        raise ModelConfigError(f"{preset_source} preset: unknown preset {preset_name!r} "
                               f"(known: {', '.join(sorted(PRESETS))})")
    preset = PRESETS[preset_name]
    preset_layer = {"base_url": preset.base_url, **preset.defaults}
    layers.append((f"preset:{preset.name}", preset_layer))
    layers.append(("default", CODE_DEFAULTS))
    values: dict[str, Any] = {}
    sources: dict[str, str] = {"preset": preset_source}
    for key in CODE_DEFAULTS:
        source, value = next((s, lay[key]) for s, lay in layers if lay.get(key) is not None
                             or (s == "default" and key in lay))
        values[key] = _coerce(source, key, value)
        sources[key] = source
    headers = {**preset.headers, **_headers(variant)}
    api_key_env = next((str(lay["api_key_env"]) for _, lay in layers[:2]
                        if lay.get("api_key_env")), None)
    return ResolvedModelConfig(preset, values, sources, headers, api_key_env)


def _layer(source: str, raw: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (raw or {}).items():
        key = _ALIASES.get(key, key)
        if key not in CODE_DEFAULTS and key not in _EXTRA_KEYS:
            known = ", ".join(sorted([*CODE_DEFAULTS, *_EXTRA_KEYS]))
            raise ModelConfigError(f"{source}: unknown model setting {key!r} (known: {known})")
        if value is not None:
            out[key] = value
    return out


def _headers(variant: Mapping[str, Any] | None) -> dict[str, str]:
    raw = (variant or {}).get("headers") or {}
    if not isinstance(raw, Mapping):
        raise ModelConfigError("variant headers: expected a mapping of header name to value")
    return {str(k): str(v) for k, v in raw.items()}


def _coerce(source: str, key: str, value: Any) -> Any:
    if value is None:
        return None
    if key == "base_url":
        return _base_url(source, value)
    try:
        if isinstance(value, bool):
            raise TypeError
        if key in _FLOATS:
            number: float = float(value)
        elif key in _INTS:
            if isinstance(value, float) and not value.is_integer():
                raise TypeError
            number = int(value)
        else:
            return str(value)
    except (TypeError, ValueError):
        kind = "a number" if key in _FLOATS else "an integer"
        raise ModelConfigError(f"{source} {key}: expected {kind}, got {value!r}") from None
    _check_range(source, key, number)
    return int(number) if key in _INTS else number


def _base_url(source: str, value: Any) -> str:
    url = str(value).rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ModelConfigError(f"{source} base_url: expected an http(s):// URL, got {value!r}")
    return url


def _check_range(source: str, key: str, number: float) -> None:
    bad = ((key == "temperature" and not 0.0 <= number <= 2.0)
           or (key == "top_p" and not 0.0 < number <= 1.0)
           or (key in {"max_tokens", "timeout_sec"} and number <= 0)
           or (key in {"max_retries", "backoff_base_sec", "backoff_max_sec"} and number < 0))
    if bad:
        raise ModelConfigError(f"{source} {key}: {number} is out of range")
