"""The run's settings: one typed, frozen value built once from the command line and the ini file.

`build_settings` takes two lookups (option, ini) by short name (`"variant"` for
`--agentbench-variant` and the `agentbench_variant` ini key), so it runs and is tested without
pytest. A command-line value wins over the ini value, which wins over the default.

Relative paths mean what pytest's own path options mean: a command-line value is relative to
the directory pytest was invoked from, an ini value to the ini file's directory, and a default
(`taskpacks`, `reports/runs`) to the rootdir, wherever the command runs from.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pytest_agentbench.agents.variants import (
    PREDICTIONS_PREFIX,
    Variant,
    load_variant,
    predictions_variant,
)
from pytest_agentbench.run.envcaches import parse_size
from pytest_agentbench.run.hostenv import resolve_ca_bundle

Lookup = Callable[[str], Any]
LLM_OPTIONS = ("model", "base_url", "temperature", "top_p", "max_tokens", "preset", "seed")
QUARANTINE_MODES = ("run", "skip", "only")
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
RESERVED_RUN_NAMES = ("latest",)  # the output root's link to the newest run
MAX_REGRADES = 100  # --agentbench-regrade: each regrade is a sandbox per graded attempt
ENGINES_VAR = "AGENTBENCH_ENGINES"  # engines separated by ';' when no option or ini key names any


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
    """The runner image asked for, or None for the one built from pytest_agentbench/runner/."""
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
    fail_under: float | None = None
    """Exit 1 when the pass rate of scored attempts is below this (0..1); None: pytest's rule."""
    run_name: str | None = None
    """The run directory's name (and run id) instead of a generated one."""
    llm: Mapping[str, Any] = field(default_factory=dict)
    """Model options from the command line (model, base_url, preset, ...); only those given."""
    engines: tuple[str, ...] = ()
    """Docker engines as given (`--agentbench-engine`, checked); empty: the current one."""
    retry_infra: int = 0
    """Retries of an attempt whose engine was lost, each on another engine."""
    regrade: int = 0
    """Re-runs of the passing command on each graded attempt's final state, each in a fresh
    sandbox under PYTHONHASHSEED=1..N; a disagreement makes the attempt VERIFIER_FLAKY."""
    resources_scale: float = 1.0
    """--agentbench-resources-scale: every task's CPU and memory limits times this, in every
    sandbox but setup's (core/attempt_config.scaled_resources); the records carry the values."""

    @property
    def docker(self) -> bool:
        return self.sandbox == "docker"

    def variant_hash(self) -> str:
        """The variant's config hash as every record carries it (the CLI model options too)."""
        return self.variant.config_hash({"llm": dict(self.llm)})


def build_settings(
    option: Lookup,
    ini: Lookup,
    *,
    suites: list[str],
    rootpath: Path,
    invocation_dir: Path | None = None,
    ini_dir: Path | None = None,
    worker: bool = False,
) -> RunSettings:
    """The settings from command-line `option` and `ini` lookups. Raises ValueError (or the
    variant's VariantError, or OutDirError) with a one-line message on a bad value.
    `invocation_dir` (default: the cwd) anchors relative command-line paths, `ini_dir`
    (default: `rootpath`) relative ini paths, `rootpath` the defaults. A `worker` (an xdist
    worker) joins the run its controller made, so the output root and the run name are not
    checked again: the controller has made that directory by then."""
    paths = _Anchors(invocation_dir or Path.cwd(), ini_dir or rootpath, rootpath)
    resume_given = option("resume")
    resume = paths.given(resume_given) if resume_given else None
    if resume and not suites:
        suites = _suites_of_run(resume)
    taskpacks = paths.pick(option("taskpacks"), ini("taskpacks"), "taskpacks")
    variant = _variant(option, ini, paths)
    attempts = _attempts(option("attempts"), ini("attempts"))
    out = paths.pick(option("out"), ini("out"), "reports/runs")
    out_label = "--agentbench-out" if option("out") else (
        "agentbench_out (ini)" if ini("out") else "the default output root")
    run_name = _run_name(option("run_name"))
    if not resume and not worker:
        check_out_dir(out, f"{out_label}={out}")
        if run_name and (out / run_name).exists():
            raise OutDirError(
                f"--agentbench-run-name={run_name}: {out / run_name} exists; choose another "
                f"name, or continue that run with --agentbench-resume={out / run_name}"
            )
    ca_bundle = resolve_ca_bundle(option("ca_bundle") or ini("ca_bundle") or "auto")
    git_cache = option("git_cache")
    return RunSettings(
        suites=tuple(sorted(set(suites))),
        taskpacks=taskpacks,
        variant=variant,
        attempts=attempts,
        quarantine=_quarantine(option("quarantine"), ini("quarantine")),
        out=out,
        out_label=out_label,
        resume=resume,
        image=option("image") or ini("image") or None,
        sandbox=option("sandbox") or "docker",
        full_logs=bool(option("full_logs")),
        keep_workspace=bool(option("keep_workspace")),
        ca_bundle=Path(ca_bundle) if ca_bundle else None,
        git_cache=paths.given(git_cache) if git_cache else None,
        env_cache=option("env_cache") or ini("env_cache") or None,
        env_cache_max_size=_size(option("env_cache_max_size"), ini("env_cache_max_size")),
        llm=_llm_options(option),
        fail_under=_fail_under(option("fail_under"), ini("fail_under")),
        run_name=run_name,
        engines=_engines(option("engine"), ini("engines")),
        retry_infra=_retry_infra(option("retry_infra"), ini("retry_infra")),
        regrade=_count(option("regrade"), ini("regrade"), "regrade", "regrades", MAX_REGRADES),
        resources_scale=resources_scale(option("resources_scale")),
    )


def _variant(option: Lookup, ini: Lookup, paths: _Anchors) -> Variant:
    """The variant: --agentbench-predictions FILE, or `predictions:FILE` (FILE relative like
    any path option), or a name or variant YAML."""
    given, predictions = option("variant"), option("predictions")
    if predictions:
        if given and not str(given).startswith(PREDICTIONS_PREFIX):
            raise ValueError(f"--agentbench-predictions={predictions} and --agentbench-variant="
                             f"{given}: give one (the predictions file is the agent)")
        return predictions_variant(paths.given(predictions))
    value = str(given or ini("variant") or "oracle")
    if value.startswith(PREDICTIONS_PREFIX):
        file = value[len(PREDICTIONS_PREFIX):]
        return predictions_variant(paths.given(file) if given else paths.pick(None, file, file))
    return _with_cassette(load_variant(value), option("cassette_replay"), paths)


def _with_cassette(variant: Variant, replay: Any, paths: _Anchors) -> Variant:
    """--agentbench-cassette-replay RUN_DIR: the command agent's `params.cassette`; the
    variant's config hash changes with it, as a replay is not the model's run."""
    if not replay:
        return variant
    where = f"--agentbench-cassette-replay={replay}"
    if variant.agent != "command":
        raise ValueError(f"{where}: cassettes replay command agents; variant {variant.name} "
                         f"runs agent {variant.agent!r}")
    path = paths.given(replay)
    if not path.exists():
        raise ValueError(f"{where}: no such run directory or cassette file ({path})")
    return replace(variant, params={**variant.params, "cassette": str(path)})


def _engines(given: Any, from_ini: Any) -> tuple[str, ...]:
    """The engines as given, each checked (one line naming the bad value), names unique."""
    from pytest_agentbench.sandbox.docker.engine_spec import check_unique, parse_engine

    from_env = [t for t in re.split(r"[;\n]", os.environ.get(ENGINES_VAR, ""))]
    texts = [str(t).strip() for t in (given or from_ini or from_env) if str(t).strip()]
    where = ("--agentbench-engine" if given else "agentbench_engines (ini)" if from_ini
             else f"${ENGINES_VAR}")
    specs = []
    for text in texts:
        try:
            specs.append(parse_engine(text))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    try:
        check_unique(specs)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return tuple(texts)


MAX_RESOURCES_SCALE = 64.0  # a task's own limits reach 64 CPUs; past that nothing is measured


def resources_scale(given: Any) -> float:
    """--agentbench-resources-scale F: a number, 0 < F <= 64 (default 1); one line otherwise."""
    if given is None or given == "":
        return 1.0
    text = str(given).strip()
    try:
        scale = float(text) if len(text) <= 32 else math.nan
    except ValueError:
        scale = math.nan
    if not (math.isfinite(scale) and 0 < scale <= MAX_RESOURCES_SCALE):
        shown = given if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
        raise ValueError(f"--agentbench-resources-scale: expected a number above 0 and at most "
                         f"{MAX_RESOURCES_SCALE:g} (0.5 halves every task's CPU and memory "
                         f"limits), got {shown!r}")
    return scale


def _retry_infra(given: Any, from_ini: Any) -> int:
    return _count(given, from_ini, "retry_infra", "retries")


def _count(given: Any, from_ini: Any, name: str, what: str, most: int | None = None) -> int:
    """A whole number, 0 or more (default 0) and at most `most` when given, from the option or
    its ini key; a bad value is one line naming where it came from."""
    raw = given if given is not None else from_ini
    if raw is None or raw == "":
        return 0
    text = str(raw).strip()
    # a few digits only: int() of a 400-digit text is a number no loop over it ever finishes
    count = int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else -1
    if count < 0 or (most is not None and count > most):
        where = (f"--agentbench-{name.replace('_', '-')}" if given is not None
                 else f"agentbench_{name} (ini)")
        bound = "0 or more" if most is None else f"0 to {most}"
        shown = raw if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
        raise ValueError(f"{where}: expected a whole number of {what} ({bound}), got {shown!r}")
    return count


@dataclass(frozen=True)
class _Anchors:
    """Where relative paths are anchored: command line, ini file, default."""

    invocation: Path
    ini: Path
    root: Path

    def given(self, value: str | os.PathLike[str]) -> Path:
        """A command-line path, absolute."""
        return (self.invocation / Path(value).expanduser()).resolve()

    def pick(self, given: Any, from_ini: Any, default: str) -> Path:
        """The command-line value, else the ini value, else the default; absolute."""
        if given:
            return self.given(given)
        base, value = (self.ini, from_ini) if from_ini else (self.root, default)
        return (base / Path(str(value)).expanduser()).resolve()


def _run_name(given: Any) -> str | None:
    if not given:
        return None
    name = str(given)
    if not RUN_NAME.fullmatch(name) or name in RESERVED_RUN_NAMES:
        raise ValueError(
            f"--agentbench-run-name={name}: expected letters, digits, '.', '_' or '-' "
            "(at most 100, not starting with a dot or dash), and not 'latest'"
        )
    return name


def _fail_under(given: Any, from_ini: Any) -> float | None:
    """The pass-rate threshold, as a fraction (0.8) or a percentage (80%)."""
    raw = given if given is not None else from_ini
    if raw is None or raw == "":
        return None
    where = "--agentbench-fail-under" if given is not None else "agentbench_fail_under (ini)"
    text = str(raw).strip()
    try:
        rate = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"{where}: expected a pass rate in 0..1 or 0%..100%, got {raw!r}")
    return rate


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


def _suites_of_run(resume: Path) -> list[str]:
    """--agentbench-resume with no suite: the suites the run directory was started with."""
    try:
        suites: list[str] = json.loads((resume / "run.json").read_text("utf-8"))["suites"]
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(
            f"--agentbench-resume {resume}: not a readable run directory "
            f"({type(exc).__name__}: {exc})"
        ) from None
    return suites


def _attempts(given: Any, from_ini: Any) -> int:
    """Attempts per task: the ini key is typed `int` where pytest can (8.4+), and checked here
    either way, naming where a bad value came from."""
    raw = (1 if from_ini in (None, "") else from_ini) if given is None else given
    where = "--agentbench-attempts" if given is not None else "agentbench_attempts (ini)"
    try:
        attempts = int(str(raw).strip())
    except ValueError:
        attempts = 0
    if attempts < 1:
        raise ValueError(f"{where}: expected a positive integer, got {raw!r}")
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
