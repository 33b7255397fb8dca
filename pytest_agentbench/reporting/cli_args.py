"""What the `report` commands share (reporting/cli.py and html/cli.py): the output root and
pairing options, naming a run, loading a pair or a list of runs and pairing them, the error line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_agentbench.reporting.names import ReportError

RUN_HELP = "a run directory, a run name in the output root, or `latest`"
METHOD_HELP = "primary paired test (both are always reported; default mcnemar)"
EXIT_BAD_INPUT = 2
_REPORT_SUFFIXES = (".md", ".csv", ".json", ".html", ".txt")


def add_out(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="output root where run names and `latest` are looked up (default: "
                             "ini agentbench_out, else reports/runs, under the project root)")


def add_run_pair(parser: argparse.ArgumentParser, method_help: str = METHOD_HELP,
                 out: bool = False) -> None:
    """`--run-a`, `--run-b` (with `--out` after them when `out`), `--method` and the pairing
    options: what `report paired` and `report paired-html` both take."""
    parser.add_argument("--run-a", required=True, metavar="A", help=f"baseline run: {RUN_HELP}")
    parser.add_argument("--run-b", required=True, metavar="B", help=f"variant run: {RUN_HELP}")
    if out:
        add_out(parser)
    add_method_and_pairing(parser, method_help)


def add_method_and_pairing(parser: argparse.ArgumentParser, method_help: str = METHOD_HELP
                           ) -> None:
    """`--method` (the primary paired test) and the pairing options."""
    parser.add_argument("--method", choices=("mcnemar", "bootstrap"), default="mcnemar",
                        help=method_help)
    add_pairing(parser)


def add_pairing(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--missing", choices=("skip", "fail"), default="fail",
                        help="tasks or attempts present in only one run: drop them (skip) or "
                             "refuse (fail, default)")
    parser.add_argument("--allow-mismatch", action="append", default=[], metavar="FIELD",
                        choices=("task_commit", "image", "limits", "harness_version"),
                        help="accept a difference in this pairing field (repeatable)")
    add_resource_override(parser)
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--resamples", type=int, default=10_000,
                        help="bootstrap resamples (default 10000)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level")
    parser.add_argument("--infra-as-failure", action="store_true",
                        help="count infra errors as failures instead of dropping those pairs")


def add_resource_override(parser: argparse.ArgumentParser) -> None:
    """`--allow-resource-difference`: the pairing field `resources` allowed (reporting/
    resources.py), so it rides in `allow_mismatch` wherever that goes."""
    parser.add_argument("--allow-resource-difference", dest="allow_mismatch",
                        action="append_const", const="resources",
                        help="compare runs made under different resource policies (CPU, "
                             "memory, pids or disk limits; e.g. --agentbench-resources-scale "
                             "runs): refused otherwise; the report then says which differ")


def fail(exc: Exception) -> int:
    """Bad input: one line, exit 2."""
    print(f"agentbench: {exc}", file=sys.stderr)
    return EXIT_BAD_INPUT


def run_dir(spec: str, args: argparse.Namespace) -> Path:
    """The run directory `spec` names (runs.resolve_run), with `--out` checked first: it used
    to name the report file, so a file there is refused with a pointer to `--output`."""
    from pytest_agentbench.reporting.runs import resolve_run

    out: Path | None = args.out
    if out is not None and (out.is_file() or out.suffix.lower() in _REPORT_SUFFIXES):
        raise ReportError(f"--out {out}: --out is the output root (a directory of runs); "
                          "write the report to a file with --output FILE")
    return resolve_run(spec, out)


def load_pair(a: str, b: str, args: argparse.Namespace) -> tuple[Any, Any]:
    from pytest_agentbench.reporting.load import load_runs

    run_a, run_b = load_runs([run_dir(a, args), run_dir(b, args)])
    return run_a, run_b


def paired_report(args: argparse.Namespace) -> Any:
    """`paired.compare` of `--run-a` and `--run-b` with the pairing options."""
    from pytest_agentbench.reporting.paired import compare

    run_a, run_b = load_pair(args.run_a, args.run_b, args)
    return compare(run_a, run_b, args.method, args.missing, args.allow_mismatch, args.seed,
                   args.resamples, args.alpha, args.infra_as_failure)


def compare_report(args: argparse.Namespace, command: str) -> Any:
    """`compare.compare_runs` of RUN... (and `--baseline`, put in front when not among them)."""
    from pytest_agentbench.reporting.compare import compare_runs
    from pytest_agentbench.reporting.load import load_runs

    paths = [run_dir(spec, args) for spec in args.runs]
    base = 0
    if args.baseline is not None:
        wanted = run_dir(args.baseline, args).resolve()
        found = [i for i, p in enumerate(paths) if p.resolve() == wanted]
        if found:
            base = found[0]
        else:
            paths.insert(0, wanted)
    if len(paths) < 2:
        raise ReportError(f"report {command} needs at least two runs (RUN RUN [RUN...], "
                          "or one RUN and a --baseline)")
    runs = load_runs(paths, fields="all")
    return compare_runs(runs, base, args.method, args.missing, args.allow_mismatch, args.seed,
                        args.resamples, args.alpha, args.infra_as_failure)
