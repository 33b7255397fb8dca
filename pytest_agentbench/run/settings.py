"""The run's settings: one typed, frozen value built once from the command line and the ini file.

`build_settings` takes two lookups (option, ini) by short name (`"variant"` for
`--agentbench-variant` and the `agentbench_variant` ini key), so it runs and is tested without
pytest. A command-line value wins over the ini value, which wins over the default.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pytest_agentbench.agents.variants import Variant, load_variant
from pytest_agentbench.run.envcaches import parse_size
from pytest_agentbench.run.hostenv import resolve_ca_bundle

Lookup = Callable[[str], Any]
LLM_OPTIONS = ("model", "base_url", "temperature", "top_p", "max_tokens", "preset", "seed")
QUARANTINE_MODES = ("run", "skip", "only")


class OutDirError(Exception):
    """--agentbench-out names a place where no run directory can be made."""


@dataclass(frozen=True)
class RunSettings:
    """What one run was asked to do. Every field is final once the run starts."""

    suites: tuple[str, ...]
    """Suites to run (sorted, unique): directories under `taskpacks`."""
    taskpacks: Path
    """The taskpacks root (absolute)."""
    variant: Variant
    """The agent variant under test."""
    attempts: int
    """Attempts per task (pass@k), at least 1."""
    quarantine: str
    """Quarantined tasks: `run` (non-strict xfail), `skip`, or `only` (run only them)."""
    out: Path
    """Output root; each run makes a directory under it (absolute)."""
    out_label: str
    """How the output root was given, for messages: `--agentbench-out` or the ini key."""
    resume: Path | None
    """The run directory to continue, or None for a new run."""
    image: str | None
    """The runner image asked for, or None for the one built from runner/."""
    sandbox: str
    """`docker`, or `local` (commands run unisolated on the host; tests only)."""
    full_logs: bool
    """Keep untruncated command output."""
    keep_workspace: bool
    """Keep each attempt's final repository under tasks/<id>/repo."""
    ca_bundle: Path | None
    """CA bundle mounted into setup sandboxes, resolved from `auto|none|PATH`."""
    git_cache: Path | None
    """Mirror cache root, or None for the default."""
    env_cache: str | None
    """Environment cache root as given (`none` disables; None: the default)."""
    env_cache_max_size: str | None = None
    """Environment cache cap as given (`20G`; checked when settings are built; None: default)."""
    llm: Mapping[str, Any] = field(default_factory=dict)
    """Model options from the command line (model, base_url, preset, ...); only those given."""

    @property
    def docker(self) -> bool:
        return self.sandbox == "docker"

    def variant_hash(self) -> str:
        """The variant's config hash as every record carries it (the CLI model options too)."""
        return self.variant.config_hash({"llm": dict(self.llm)})


def build_settings(
    option: Lookup, ini: Lookup, *, suites: list[str], rootpath: Path
) -> RunSettings:
    """The settings from command-line `option` and `ini` lookups. Raises ValueError (or the
    variant's VariantError, or OutDirError) with a one-line message on a bad value."""
    resume = option("resume")
    if resume and not suites:
        suites = _suites_of_run(resume)
    taskpacks = Path(option("taskpacks") or ini("taskpacks") or "taskpacks")
    if not taskpacks.is_absolute():
        taskpacks = rootpath / taskpacks if not taskpacks.exists() else taskpacks.resolve()
    variant = load_variant(option("variant") or ini("variant") or "oracle")
    attempts = _attempts(option("attempts"), ini("attempts"))
    out = Path(option("out") or ini("out") or "reports/runs")
    out_label = "--agentbench-out" if option("out") else "agentbench_out (ini)"
    if not resume:
        check_out_dir(out.resolve(), f"{out_label}={out}")
    ca_bundle = resolve_ca_bundle(option("ca_bundle") or ini("ca_bundle") or "auto")
    git_cache = option("git_cache")
    return RunSettings(
        suites=tuple(sorted(set(suites))),
        taskpacks=taskpacks,
        variant=variant,
        attempts=attempts,
        quarantine=_quarantine(option("quarantine"), ini("quarantine")),
        out=out.resolve(),
        out_label=out_label,
        resume=Path(resume) if resume else None,
        image=option("image") or ini("image") or None,
        sandbox=option("sandbox") or "docker",
        full_logs=bool(option("full_logs")),
        keep_workspace=bool(option("keep_workspace")),
        ca_bundle=Path(ca_bundle) if ca_bundle else None,
        git_cache=Path(git_cache) if git_cache else None,
        env_cache=option("env_cache") or ini("env_cache") or None,
        env_cache_max_size=_size(option("env_cache_max_size"), ini("env_cache_max_size")),
        llm=_llm_options(option),
    )


def check_out_dir(out: Path, where: str) -> None:
    """Refuse an output root that cannot hold run directories, creating nothing. `where` names
    the option and its value in the message (`--agentbench-out=DIR`)."""
    probe = out
    while not probe.exists() and not probe.is_symlink() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        what = "is a file" if probe.is_file() else "exists and is not a directory"
        if probe == out:
            raise OutDirError(f"{where}: {what}; expected a directory (or a path to create)")
        raise OutDirError(f"{where}: {probe} {what}, so no directory can be made under it")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise OutDirError(f"{where}: {probe} is not writable")


def _suites_of_run(resume: str) -> list[str]:
    """--agentbench-resume with no suite: the suites the run directory was started with."""
    try:
        suites: list[str] = json.loads((Path(resume) / "run.json").read_text("utf-8"))["suites"]
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(
            f"--agentbench-resume {resume}: not a readable run directory "
            f"({type(exc).__name__}: {exc})"
        ) from None
    return suites


def _attempts(given: Any, from_ini: Any) -> int:
    raw = (from_ini or 1) if given is None else given
    try:
        attempts = int(raw)
    except ValueError:
        attempts = 0
    if attempts < 1:
        raise ValueError("--agentbench-attempts: expected a positive integer")
    return attempts


def _size(given: Any, from_ini: Any) -> str | None:
    """The env-cache cap as given, checked now so that a typo is one usage line."""
    if not (given or from_ini):
        return None
    where = ("--agentbench-env-cache-max-size" if given
             else "agentbench_env_cache_max_size (ini)")
    parse_size(str(given or from_ini), where)
    return str(given or from_ini)


def _quarantine(given: Any, from_ini: Any) -> str:
    """The quarantine mode. The command line's choices are checked by argparse; the ini value
    is checked here, so that a typo does not silently run quarantined tasks as `run` would."""
    mode = given or from_ini or "run"
    if mode not in QUARANTINE_MODES:
        where = "--agentbench-quarantine" if given else "agentbench_quarantine (ini)"
        raise ValueError(f"{where}: expected one of {', '.join(QUARANTINE_MODES)}, got {mode!r}")
    return str(mode)


def _llm_options(option: Lookup) -> dict[str, Any]:
    """The model options given on the command line. A loopback base URL with no preset means a
    local server that needs no key (preset `local`)."""
    llm = {name: value for name in LLM_OPTIONS if (value := option(name)) is not None}
    host = urlparse(str(llm.get("base_url", ""))).hostname or ""
    if "preset" not in llm and (host in ("localhost", "::1") or host.startswith("127.")):
        llm["preset"] = "local"
    return llm
