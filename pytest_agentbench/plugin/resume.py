"""What a resumed run takes from its own run.json: a resume is
`pytest --agentbench-resume DIR`, nothing more. The options that make up the run's recorded
configuration (attempts, variant, sandbox, regrade, resources scale) default to the recorded
values, ahead of the ini file; an option given on the command line still wins, and the resume
check (run/state.py) still refuses one that differs from the record.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agentbench.agents.variants import VariantError, load_variant

Lookup = Callable[[str], Any]


def recorded_options(run_dir: Path) -> dict[str, Any]:
    """The option values a run was started with, by short name, as far as run.json says them
    ({} when it cannot be read: the resume check says why, in one line)."""
    try:
        config = json.loads((run_dir / "run.json").read_text("utf-8")).get("config")
    except (OSError, ValueError, AttributeError):
        return {}
    if not isinstance(config, dict):
        return {}
    found: dict[str, Any] = {}
    if isinstance(config.get("attempts"), int) and config["attempts"] >= 1:
        found["attempts"] = config["attempts"]
    if config.get("sandbox") in ("docker", "local"):
        found["sandbox"] = config["sandbox"]
    if isinstance(config.get("regrade"), int):
        found["regrade"] = config["regrade"]
    scale = config.get("resources_scale")
    if isinstance(scale, int | float) and not isinstance(scale, bool):
        found["resources_scale"] = scale
    variant = _variant_name(config.get("variant"))
    if variant:
        found["variant"] = variant
    return found


def _variant_name(recorded: Any) -> str | None:
    """The name that loads the recorded variant (a built-in agent or a bundled variant), when
    it loads to the very same configuration; None for a variant file given by path (its path is
    not recorded: the user names it again)."""
    if not isinstance(recorded, dict) or not isinstance(recorded.get("name"), str):
        return None
    try:
        if load_variant(recorded["name"]).config() == recorded:
            return str(recorded["name"])
    except (VariantError, OSError, ValueError):
        return None
    return None


def with_recorded(option: Lookup, run_dir: Path | None) -> Lookup:
    """`option`, falling back to the resumed run's recorded values when one is not given."""
    if run_dir is None:
        return option
    recorded = recorded_options(run_dir)

    def lookup(name: str) -> Any:
        value = option(name)
        return recorded.get(name) if value is None and name in recorded else value

    return lookup


# Options a resume must not repeat: the run directory stands for them.
_NOT_REPEATED = ("--agentbench-suite", "--agentbench-run-name", "--agentbench-resume")


def resume_command(args: list[str], run_dir: Path) -> str:
    """The command that continues `run_dir`: the invocation's own arguments (workers, -k, paths
    to taskpacks, model options) without the suite, run name or an earlier resume, plus
    `--agentbench-resume=DIR`; quoted for a POSIX shell."""
    import shlex

    kept: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
            continue
        if arg in _NOT_REPEATED:
            skip_value = True
            continue
        if arg.startswith(tuple(f"{name}=" for name in _NOT_REPEATED)):
            continue
        kept.append(arg)
    return shlex.join(["pytest", *kept, f"--agentbench-resume={run_dir}"])
