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
import inspect
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import yaml

from pytest_agentbench.agents.builtin import BUILTIN_AGENTS
from pytest_agentbench.agents.port import Agent, AgentFactory
from pytest_agentbench.tasks.bounded_yaml import parse_yaml, text_problems, yaml_message
from pytest_agentbench.tasks.problems import show
from pytest_agentbench.tasks.taskpack_files import (
    MAX_TASK_FILE_BYTES,
    UnsafeFileError,
    read_regular_file,
)
from pytest_agentbench.text.redaction import Redactor

ENTRY_POINT_GROUP = "pytest_agentbench.agents"
PREDICTIONS_PREFIX = "predictions:"
VARIANT_KEYS = {"name", "agent", "params", "model", "budgets", "description"}
BUILTIN_VARIANT_DIR = Path(__file__).parent / "variant_files"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+@-]{0,99}$")


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
    description: str = ""  # what the variant is for (`agentbench variants`); not hashed

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
    """A built-in agent name, a bundled variant (variant_files/<name>.yaml), a YAML path, or
    `predictions:FILE` (a predictions file's patches).

    Every problem with a variant file is one VariantError line that starts with the file.
    """
    if value.startswith(PREDICTIONS_PREFIX):
        return predictions_variant(Path(value[len(PREDICTIONS_PREFIX):]))
    path = Path(value)
    if not path.suffix and (BUILTIN_VARIANT_DIR / f"{value}.yaml").is_file():
        path = BUILTIN_VARIANT_DIR / f"{value}.yaml"
    if path.suffix not in (".yaml", ".yml"):
        return Variant(name=value, agent=value)
    data = _read_variant_file(value, path)
    if not isinstance(data, dict):
        message = f"expected a mapping at the top level, got {show(data)}"
        raise VariantError(f"variant file {value}: {message}")
    _check_variant(value, data)
    params = data.get("params") or {}
    if data["agent"] == "predictions" and isinstance(params.get("predictions"), str):
        # a predictions file named by a variant file is relative to that file
        params = {**params, "predictions": str((path.parent / params["predictions"]).resolve())}
    return Variant(
        name=str(data.get("name") or path.stem),
        agent=data["agent"],
        params=params,
        model=data.get("model") or {},
        budgets=data.get("budgets") or {},
        source=str(path),
        description=" ".join(str(data.get("description") or "").split()),
    )


def predictions_variant(path: Path) -> Variant:
    """The variant that scores a predictions file's patches; the file is read and checked now
    (VariantError, one line) and its sha256 hashed into the variant's config."""
    from pytest_agentbench.agents.predictions import (
        PredictionsError,
        file_sha256,
        load_predictions,
    )

    path = path.expanduser().resolve()
    try:
        load_predictions(path)
        digest = file_sha256(path)
    except (PredictionsError, OSError) as exc:
        raise VariantError(str(exc)) from None
    return Variant(name="predictions", agent="predictions",
                   params={"predictions": str(path), "sha256": digest}, source=str(path),
                   description=f"the patches of {path.name}")


def _read_variant_file(value: str, path: Path) -> Any:
    try:
        raw = read_regular_file(path, MAX_TASK_FILE_BYTES)
    except FileNotFoundError:
        raise VariantError(f"variant file {value}: not found") from None
    except UnsafeFileError as exc:
        raise VariantError(f"variant file {value}: {exc}") from None
    except OSError as exc:
        raise VariantError(f"variant file {value}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"not UTF-8 text (byte {exc.start}: {exc.reason})"
        raise VariantError(f"variant file {value}: {message}") from None
    try:
        data = parse_yaml(text)
    except yaml.YAMLError as exc:
        raise VariantError(f"variant file {value}: {yaml_message(exc, text)}") from None
    except (RecursionError, MemoryError):
        raise VariantError(f"variant file {value}: too deeply nested or too large") from None
    return {} if data is None else data


def _check_variant(value: str, data: dict[Any, Any]) -> None:
    def fail(where: str, message: str) -> VariantError:
        return VariantError(f"variant file {value}: {where}: {message}")

    for key in data:
        if key not in VARIANT_KEYS:
            plain = isinstance(key, str) and len(key) <= 60 and key.isprintable()
            shown = key if plain else show(key)
            expected = ", ".join(sorted(VARIANT_KEYS))
            raise fail(shown, f"unknown key (expected one of {expected})")
    bad_text = next(iter(text_problems(data)), None)
    if bad_text is not None:
        raise fail(*bad_text)
    if not isinstance(data.get("agent"), str) or not data["agent"]:
        raise fail("agent", f"required, the name of an agent (got {show(data.get('agent'))})")
    for key in ("name", "description"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise fail(key, f"expected a string, got {show(data[key])}")
    name = data.get("name")
    if name and not _NAME.match(name):
        raise fail("name", f"expected letters, digits and ._+@- (at most 100), got {show(name)}")
    for key in ("params", "model", "budgets"):
        if not isinstance(data.get(key) or {}, dict):
            raise fail(key, f"expected a mapping, got {show(data[key])}")
        problem = _plain_problem(data.get(key) or {}, key)
        if problem is not None:
            raise fail(*problem)


def _plain_problem(value: Any, where: str) -> tuple[str, str] | None:
    """The first value that is not plain JSON (str keys, finite numbers): the config is hashed
    and written into every record."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return where, f"keys must be strings, got {show(key)}"
            found = _plain_problem(item, f"{where}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _plain_problem(item, f"{where}[{index}]")
            if found is not None:
                return found
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return where, f"expected a finite number, got {show(value)}"
    if value is None or isinstance(value, str | int | float | bool):
        return None
    return where, f"expected a string, number, true/false, list or mapping, got {show(value)}"


def agent_builder(
    variant: Variant,
    *,
    extra_factories: Iterable[Mapping[str, AgentFactory]] = (),
    llm_cli: Mapping[str, Any] | None = None,
    redactor: Redactor | None = None,
) -> Callable[[], Agent]:
    """What makes the variant's agent, once per attempt; called once per run.

    Scans the entry points once, checks the variant up front (its agent exists; llm_v0 resolves
    its model settings, prompt and key) and raises VariantError with one line if not.
    `extra_factories` are the `pytest_agentbench_agents` hook results, `llm_cli` the CLI's model
    options, `redactor` knows the run's secrets (llm_v0 scrubs its conversation with it).
    """
    from pytest_agentbench.agents.llm_config import LLMAgentConfig
    from pytest_agentbench.llm import ModelConfigError

    factories = _agent_factories(extra_factories)
    if variant.agent not in factories:
        raise VariantError(_unknown_agent(variant, sorted(factories)))
    factory = factories[variant.agent]
    if getattr(factory, "uses_llm_config", False):  # llm_v0 and the agents built on it
        try:
            replay = bool(getattr(factory, "takes_variant_params", False)
                          and variant.params.get("cassette"))  # a command agent's replay
            config = (LLMAgentConfig.resolve(variant.config(), llm_cli, require_key=False)
                      if replay else LLMAgentConfig.resolve(variant.config(), llm_cli))
            check_params = getattr(factory, "check_params", None)
            if check_params is not None:  # the agent's own params, beside llm_v0's
                check_params(variant.params)
        except ModelConfigError as exc:
            raise VariantError(f"variant {variant.name}: {exc}") from None
        if getattr(factory, "takes_variant_params", False):  # a command agent
            base = Path(variant.source).parent if variant.source != "builtin" else None
            return partial(factory, config, params=variant.params, base_dir=base,
                           redactor=redactor)
        return partial(factory, config, redactor=redactor)
    check_params = getattr(factory, "check_params", None)
    if check_params is not None:  # the predictions agent reads its file now, not per attempt
        try:
            check_params(variant.params)
        except ValueError as exc:
            raise VariantError(f"variant {variant.name}: {exc}") from None
    params = {**variant.params, **_run_dependencies(factory, llm_cli, redactor)}
    if _takes(factory, params):
        return partial(factory, **params)
    if _takes(factory, {}):  # the old form: the agent reads ctx.params
        return factory
    raise VariantError(f"variant {variant.name}: agent {variant.agent!r} cannot be made: "
                       "its factory takes neither the variant's params nor no arguments")


def _run_dependencies(
    factory: AgentFactory, llm_cli: Mapping[str, Any] | None, redactor: Redactor | None
) -> dict[str, Any]:
    """The run's CLI model options (`llm_cli`) and redactor (`redactor`), for a factory that
    names them as parameters (never through **kwargs: such a factory did not ask)."""
    try:
        named = {
            name for name, p in inspect.signature(factory).parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }
    except (TypeError, ValueError):
        return {}
    offered = {"llm_cli": dict(llm_cli or {}), "redactor": redactor}
    return {name: value for name, value in offered.items() if name in named}


def _takes(factory: AgentFactory, params: Mapping[str, Any]) -> bool:
    try:
        inspect.signature(factory).bind(**params)
    except TypeError:
        return False
    except ValueError:  # no signature to read (some builtins): try it the old way
        return not params
    return True


def _agent_factories(
    extra_factories: Iterable[Mapping[str, AgentFactory]] | None = None,
) -> dict[str, AgentFactory]:
    """Built-ins, then entry points, then plugin hooks (later sources may not shadow built-ins).

    llm_v0 (it pulls in httpx) is imported here, when agents are made, not with the variants."""
    from pytest_agentbench.agents.context_packer import ContextPackerAgent
    from pytest_agentbench.agents.llm_v0 import LLMAgent
    from pytest_agentbench.agents.predictions import PredictionsAgent
    from pytest_agentbench.agents.subagents.agent import SubagentsAgent

    found: dict[str, AgentFactory] = {**BUILTIN_AGENTS, "llm_v0": LLMAgent,
                                      "context_packer": ContextPackerAgent,
                                      "subagents": SubagentsAgent,
                                      "predictions": PredictionsAgent}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep.load())
    for result in extra_factories or ():
        for name, factory in result.items():
            found.setdefault(name, factory)
    return found


def bundled_variants() -> list[str]:
    """The variants shipped with the harness (variant_files/<name>.yaml), by name."""
    return sorted(p.stem for p in BUILTIN_VARIANT_DIR.glob("*.yaml"))


def _unknown_agent(variant: Variant, agents: list[str]) -> str:
    """One line: what is unknown, the closest names, every agent and bundled variant."""
    import difflib

    bundled = bundled_variants()
    close = difflib.get_close_matches(variant.agent, [*agents, *bundled], n=1, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return (
        f"variant {variant.name}: unknown agent {variant.agent!r}{hint}; agents: "
        f"{', '.join(agents)}; bundled variants: {', '.join(bundled) or 'none'}; or a variant "
        "YAML path"
    )


# What `agentbench variants` says of the agents shipped with the harness; an installed agent
# says it with a `description` attribute, else the first line of its docstring.
AGENT_DESCRIPTIONS = {
    "nop": "changes nothing: every valid task must fail under it",
    "oracle": "applies the task's reference solution (oracle.patch) through the tools",
    "scripted": "replays a fixed list of tool calls (the task's or the variant's script)",
    "llm_v0": "the baseline LLM agent: observation, model, tool calls, repeat; budgets checked "
              "before every model call",
    "context_packer": "llm_v0 with the failure's code (tracebacks, tests, imports) packed "
                      "under a token budget into the first message",
    "subagents": "a router delegating to specialist model calls (searcher, patcher, tester)",
    "predictions": "applies each task's patch from a predictions file (SWE-bench's JSONL); "
                   "predictions:FILE or --agentbench-predictions FILE",
}


@dataclass(frozen=True)
class Listed:
    """One line of `agentbench variants`: a name, what it runs (a variant's agent, an agent's
    origin) and a description."""

    name: str
    agent: str
    description: str


def list_bundled_variants() -> list[Listed]:
    """The bundled variants; one that cannot be read says why instead of its description."""
    out = []
    for name in bundled_variants():
        try:
            v = load_variant(name)
        except VariantError as exc:
            out.append(Listed(name, "?", f"cannot be read: {exc}"))
            continue
        out.append(Listed(v.name, v.agent, v.description or "(no description)"))
    return out


def _doc_line(factory: Any) -> str:
    text = getattr(factory, "description", None)
    if not isinstance(text, str) or not text.strip():
        text = inspect.getdoc(factory) or ""
    first = text.strip().split("\n\n")[0]
    return " ".join(first.split()) or "(no description)"


def list_agents() -> list[Listed]:
    """Built-in and installed agents (entry point group `pytest_agentbench.agents`).

    An installed agent that fails to import is listed with its error; it does not hide the
    others."""
    eps = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    try:
        factories: dict[str, Any] = _agent_factories()
    except Exception:  # an installed agent that fails to import: list it with its error below
        factories = {name: None for name in AGENT_DESCRIPTIONS}
    out = []
    for name in sorted(set(factories) | set(eps)):
        ep = eps.get(name)
        if ep is None or name in AGENT_DESCRIPTIONS:
            desc = AGENT_DESCRIPTIONS.get(name) or _doc_line(factories[name])
            shadow = " (an installed agent of this name is ignored)" if ep is not None else ""
            out.append(Listed(name, "built-in", desc + shadow))
            continue
        dist = getattr(getattr(ep, "dist", None), "name", None)
        origin = f"installed ({dist})" if dist else "installed"
        try:
            desc = _doc_line(factories[name] if factories.get(name) else ep.load())
        except Exception as exc:  # noqa: BLE001 - third-party code: any error is one line
            desc = f"cannot be loaded: {type(exc).__name__}: {' '.join(str(exc).split())}"
        out.append(Listed(name, origin, desc))
    return out
