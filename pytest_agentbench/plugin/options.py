"""Command-line options and ini keys of the plugin.

Path options are written `--agentbench-out=DIR`: pytest picks its rootdir before it knows a
plugin's options, so in `--agentbench-out DIR` the DIR is first read as a test path (the run
refuses that spelling with one line when it changed the rootdir; see plugin/agentbench_plugin.py).
"""

from __future__ import annotations

from typing import Any

import pytest


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentbench", "agentbench: evaluate coding agents on task suites")
    add = group.addoption
    add(
        "--agentbench-suite",
        action="append",
        default=[],
        metavar="NAME",
        help="run the tasks of taskpacks/NAME (repeatable); activates the plugin",
    )
    add(
        "--agentbench-taskpacks",
        metavar="DIR",
        help="taskpacks root (default: taskpacks under the rootdir)",
    )
    add(
        "--agentbench-variant",
        metavar="NAME|YAML",
        help="agent variant: oracle, nop, scripted, llm_v0, predictions:FILE, or a variant YAML "
        "(default: oracle)",
    )
    add(
        "--agentbench-predictions",
        metavar="FILE",
        help="score precomputed patches, one per task (JSONL or JSON with SWE-bench's fields "
        "instance_id, model_patch, model_name_or_path): the agent `predictions` with FILE",
    )
    add("--agentbench-attempts", type=int, metavar="K", help="attempts per task (pass@k)")
    add(
        "--agentbench-out",
        metavar="DIR",
        help="output root, each run a directory in it (default: reports/runs under the rootdir)",
    )
    add(
        "--agentbench-run-name",
        metavar="NAME",
        help="name of the run directory (and run id) instead of a generated one; the report "
        "commands take it, or `latest` for the newest run",
    )
    add(
        "--agentbench-fail-under",
        metavar="RATE",
        help="exit 1 when the pass rate of scored attempts is below RATE (0.8 or 80%%); task "
        "problems and quarantined tasks are reported apart and do not fail the run; "
        "infrastructure errors exit 10 (default: pytest's rule, any failure or error exits 1)",
    )
    add("--agentbench-full-logs", action="store_true", help="keep untruncated command output")
    add(
        "--agentbench-keep-workspace",
        action="store_true",
        help="keep each attempt's final repository under tasks/<id>/repo",
    )
    add(
        "--agentbench-quarantine",
        choices=["run", "skip", "only"],
        help="quarantined tasks: run as non-strict xfail (default), skip, or run only them",
    )
    add(
        "--agentbench-resume",
        metavar="RUN_DIR",
        help="continue RUN_DIR: skip attempts already recorded, append the rest",
    )
    add(
        "--agentbench-ca-bundle",
        metavar="PATH|auto|none",
        help="CA bundle mounted into setup sandboxes (TLS-intercepting proxies). auto (default): "
        "the first of $AGENTBENCH_CA_BUNDLE, $PIP_CERT, $REQUESTS_CA_BUNDLE, $SSL_CERT_FILE "
        "that exists",
    )
    add(
        "--agentbench-image",
        metavar="IMAGE",
        help="runner image (default: built from the package's pytest_agentbench/runner/)",
    )
    add(
        "--agentbench-sandbox",
        choices=["docker", "local"],
        help="sandbox implementation; local runs commands unisolated on the host (tests only)",
    )
    add(
        "--agentbench-env-cache",
        metavar="DIR|none",
        help="post-setup environments (the workspace with what setup left in it, and /env) "
        "keyed by setup commands, network policy, commit and image; a re-run skips its setup "
        "(default ~/.cache/agentbench/envs; none disables)",
    )
    add(
        "--agentbench-env-cache-max-size",
        metavar="SIZE",
        help="cap of the environment cache, e.g. 500M or 20G: least recently used entries are "
        "evicted past it (default 20G)",
    )
    add(
        "--agentbench-git-cache",
        metavar="DIR",
        help="mirror cache (default ~/.cache/agentbench/git)",
    )
    add(
        "--agentbench-engine",
        action="append",
        default=[],
        metavar="SPEC",
        help="a Docker engine to run sandboxes on (repeatable; default: the current one): "
        "`default`, a Docker context name, or a unix:// tcp:// ssh:// URL, optionally followed "
        "by ,slots=N ,tls=off (plaintext tcp) ,transfer=bind|archive (default: auto, probed); "
        "attempts go to the engine with a free slot",
    )
    add(
        "--agentbench-retry-infra",
        type=int,
        metavar="N",
        help="run an attempt whose engine was lost (SANDBOX_ERROR/ENGINE_LOST) again on another "
        "engine, up to N times (default 0); the record keeps every try",
    )
    add(
        "--agentbench-regrade",
        type=int,
        metavar="N",
        help="is the verifier stable? re-run the passing command N times (0 to 100, default "
        "0) on each graded attempt's final state, each in a fresh sandbox with PYTHONHASHSEED "
        "set to the regrade's number 1..N (grading keeps 0), so a test that depends on set or "
        "dict order shows; any pass/fail disagreement ends the attempt VERIFIER_FLAKY, counted as "
        "flaky with the task's problems, not against the agent; the record keeps every run",
    )
    add(
        "--agentbench-resources-scale",
        metavar="F",
        help="run every task with its CPU and memory limits times F (0 < F <= 64; 0.5 halves "
        "them; default 1) in every sandbox but setup's; pids and disk limits stay the task's. "
        "The records carry the scale and the limits applied; `agentbench report compare` over "
        "runs at several scales shows how the pass rate moves",
    )
    add(
        "--agentbench-sequential",
        metavar="BASELINE_RUN",
        help="compare with this baseline run (a run directory, a run name in the output root, "
        "or latest) as tasks finish, in a random order, and stop the run as soon as an "
        "anytime-valid test says REGRESSION or OK; the exit status is the gate's (0 OK, "
        "1 REGRESSION, 3 INCONCLUSIVE)",
    )
    add("--agentbench-sequential-max-drop", metavar="RATE",
        help="largest allowed drop in pass rate for --agentbench-sequential (default 0.05)")
    add("--agentbench-sequential-margin", metavar="RATE",
        help="non-inferiority margin for --agentbench-sequential (the smaller threshold decides)")
    add("--agentbench-sequential-alpha", metavar="A",
        help="error rate of each verdict of --agentbench-sequential, at any stopping time "
        "(default 0.05)")
    add("--agentbench-sequential-allow-mismatch", action="append", default=[], metavar="FIELD",
        choices=("task_commit", "image", "limits", "harness_version", "resources"),
        help="accept a difference in this pairing field with the baseline (repeatable; "
        "resources: the CPU, memory, pids or disk limits)")
    add("--agentbench-sequential-seed", type=int, metavar="N",
        help="seed of the random task order of --agentbench-sequential (default: random, "
        "recorded in run.json)")
    add("--agentbench-model", metavar="NAME", help="LLM model name (llm agents)")
    add("--agentbench-preset", metavar="NAME", help="LLM provider preset (openrouter, openai, ...)")
    add("--agentbench-base-url", metavar="URL", help="OpenAI-compatible base URL")
    add("--agentbench-cassette-replay", metavar="RUN_DIR",
        help="answer a command agent's model calls from the cassettes a run recorded "
        "(RUN_DIR/tasks/<id>/agent/cassette.jsonl, or one cassette file): no model, no key; a "
        "request that differs ends the attempt LLM_ERROR CASSETTE_DIVERGED")
    add(
        "--agentbench-temperature",
        type=float,
        metavar="T",
        help="sampling temperature of the model (llm agents; default: the variant's)",
    )
    add(
        "--agentbench-top-p",
        type=float,
        metavar="P",
        help="nucleus sampling top_p of the model (llm agents; default: the variant's)",
    )
    add(
        "--agentbench-max-tokens",
        type=int,
        metavar="N",
        help="most tokens per model reply (llm agents; default: the variant's)",
    )
    add(
        "--agentbench-seed",
        type=int,
        metavar="N",
        help="sampling seed sent to the model, where the provider supports one (llm agents)",
    )
    _add_int_ini(parser, "agentbench_attempts", "attempts per task (pass@k)")
    _add_int_ini(parser, "agentbench_retry_infra", "retries of an attempt whose engine was lost")
    _add_int_ini(parser, "agentbench_regrade", "passing-command re-runs (--agentbench-regrade)")
    parser.addini("agentbench_engines", "Docker engines, one per line (see --agentbench-engine)",
                  type="linelist", default=[])
    for name, help_ in [
        ("taskpacks", "taskpacks root, relative to the ini file"),
        ("variant", "default variant"),
        ("out", "output root, relative to the ini file"),
        ("fail_under", "exit 1 below this pass rate (see --agentbench-fail-under)"),
        ("quarantine", "run|skip|only"),
        ("ca_bundle", "CA bundle path|auto|none"),
        ("image", "runner image"),
        ("env_cache", "environment cache dir|none"),
        ("env_cache_max_size", "environment cache cap, e.g. 20G"),
    ]:
        parser.addini(f"agentbench_{name}", help_, default=None)


def _add_int_ini(parser: pytest.Parser, name: str, help_: str) -> None:
    """An `int` ini key where this pytest types them (8.4+); untyped before (checked when the
    settings are built either way)."""
    try:
        parser.addini(name, help_, type="int", default=None)
    except (AssertionError, ValueError, TypeError):  # pytest < 8.4 knows no "int"
        parser.addini(name, help_, default=None)


def ini_value(config: pytest.Config, name: str) -> Any:
    """An ini value; a value its type refuses (`agentbench_attempts = many`) names its key."""
    try:
        return config.getini(f"agentbench_{name}")
    except (ValueError, pytest.UsageError) as exc:  # pytest 9 raises UsageError, unnamed
        raise ValueError(f"agentbench_{name} (ini): {exc}") from None

