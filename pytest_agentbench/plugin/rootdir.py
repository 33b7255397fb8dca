"""The space form of a path option (`--agentbench-out DIR`) and pytest's rootdir.

pytest picks its rootdir and ini file before it loads plugins, so it does not know yet that DIR
belongs to `--agentbench-out`: an existing DIR is read as a test path, and the rootdir becomes
DIR or an ancestor of it, dropping the project's ini file (its `agentbench_*` keys, markers,
testpaths). By the time a plugin runs, that choice is made and cannot be undone cleanly.

So the run asks pytest's own rootdir search what it would have chosen without those values;
when the answer differs, the run stops with one line before anything is written. When it is
the same (DIR missing, or inside the project), the space form simply works.
"""

from __future__ import annotations

import inspect
import os
import shlex
from pathlib import Path
from typing import Any

import pytest


class RootdirTaken(ValueError):
    """A path option's value, written after a space, moved pytest's rootdir."""


def check_space_form(config: pytest.Config) -> None:
    """RootdirTaken (one line) when a path option written `--opt VALUE` changed the rootdir or
    the ini file pytest chose."""
    args = _scanned_args(config)
    spaced = []
    for name, given in sorted(vars(config.option).items()):
        if not name.startswith("agentbench_"):
            continue  # any of ours may name an existing path: a CA bundle, a variant YAML, ...
        flag = "--" + name.replace("_", "-")
        for value in given if isinstance(given, list) else [given]:
            if isinstance(value, str) and any(
                a == flag and b == value for a, b in zip(args, args[1:], strict=False)
            ):
                spaced.append((flag, value))
    if not spaced:
        return
    expected = _setup_without(config, [value for _, value in spaced])
    if expected is None:  # this pytest's search cannot be asked: the narrower check
        taken = [(f, v) for f, v in spaced if Path(v).resolve() == config.rootpath.resolve()]
        if taken:
            raise RootdirTaken(
                f"{_shown(taken, ' ')}: pytest took {taken[0][1]} as its rootdir; write "
                f"{_shown(taken, '=')}, with '='"
            )
        return
    if expected == (config.rootpath, config.inipath):
        return
    if expected[0] != config.rootpath:
        what = f"took {config.rootpath} as its rootdir (instead of {expected[0]})"
    else:
        what = f"did not read the project's ini file ({expected[1]})"
    # every value the search could have read as a path (pytest skips those that do not exist),
    # so that one correction is enough; all of them if none exists now
    paths = [(f, v) for f, v in spaced if (config.invocation_params.dir / v).exists()]
    offending = paths or spaced
    it = "it as a test path" if len(offending) == 1 else "them as test paths"
    raise RootdirTaken(
        f"{_shown(offending, ' ')}: pytest read {it} and {what}; write "
        f"{_shown(offending, '=')}, with '='"
    )


def _shown(options: list[tuple[str, str]], sep: str) -> str:
    """`--a X, --b Y` (as given) or `--a=X --b=Y` (as to write)."""
    return (", " if sep == " " else " ").join(f"{flag}{sep}{value}" for flag, value in options)


def _scanned_args(config: pytest.Config) -> list[str]:
    """The arguments pytest's rootdir search saw: PYTEST_ADDOPTS, then the command line."""
    extra = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    return [*extra, *map(str, config.invocation_params.args)]


def _setup_without(config: pytest.Config, values: list[str]) -> tuple[Path, Path | None] | None:
    """(rootdir, ini file) pytest's search gives for the test paths alone, or None when this
    pytest's `determine_setup` cannot be called the way we know."""
    try:
        from _pytest.config.findpaths import determine_setup
    except ImportError:
        return None
    paths = [str(a) for a in config.args] if _paths_given(config) else []
    candidates: dict[str, Any] = {
        "inifile": config.getoption("inifilename", None),
        "override_ini": config.getoption("override_ini", None),
        "args": [p for p in paths if p not in values],
        "rootdir_cmd_arg": config.getoption("rootdir", None) or None,
        "invocation_dir": config.invocation_params.dir,
    }
    try:
        wanted = inspect.signature(determine_setup).parameters
        result = determine_setup(**{k: v for k, v in candidates.items() if k in wanted})
    except (TypeError, ValueError, pytest.UsageError):
        return None
    return Path(result[0]), (Path(result[1]) if result[1] else None)


def _paths_given(config: pytest.Config) -> bool:
    return config.args_source == pytest.Config.ArgsSource.ARGS
