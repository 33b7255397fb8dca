"""`agentbench report summary|html|paired|compare|tasks`, `agentbench gate` and `agentbench plan`.

The console script calls `add_report_commands(subparsers)`; every parser it adds sets
`func(args) -> int`, the process exit code:
- report summary / html / paired / compare / tasks: 0, or 2 on bad input (no such run, malformed
  records, a refused pairing);
- gate: 0 no regression, 1 regression, 2 bad input, a refused pairing or nothing left to pair,
  3 inconclusive (no regression, but the data's minimum detectable effect exceeds the allowed
  drop; 0 with --inconclusive-ok; see gate.py);
- plan: 0, or 2 on bad input;
- argparse usage errors exit 2 as well.
A run is named by a directory path, a run name (a directory of the output root) or `latest`
(see runs.py); `--out DIR` is the output root, `--output FILE` where the report is written.
`main(argv)` runs these commands on their own (`python -m pytest_agentbench.reporting.cli`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_agentbench.reporting.cli_args import (
    RUN_HELP,
    add_method_and_pairing,
    add_out,
    add_pairing,
    add_resource_override,
    add_run_pair,
    compare_report,
    fail,
    load_pair,
    paired_report,
    run_dir,
)
from pytest_agentbench.reporting.names import Fields, ReportError
from pytest_agentbench.reporting.scan import add_scan_parser

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_INCONCLUSIVE = 0, 1, 2, 3




def add_report_commands(subparsers: Any) -> None:
    """Add `report` (summary, html, paired) and `gate` to an argparse subparsers object."""
    report = subparsers.add_parser("report", help="summary and paired reports over run dirs")
    kinds = report.add_subparsers(
        dest="report_kind",
        metavar="{summary,html,paired,compare,tasks,index,paired-html,compare-html,scan}")
    kinds.required = True
    add_scan_parser(kinds)

    summary = kinds.add_parser("summary", help="pass rates, taxonomy, costs of one run")
    summary.add_argument("--run", default="latest", metavar="RUN",
                         help=f"{RUN_HELP} (default: latest)")
    _add_format(summary, ("md", "csv", "json", "html"))
    summary.add_argument("--infra-as-failure", action="store_true",
                         help="count infra errors (SANDBOX_ERROR, LLM_ERROR) as agent failures "
                              "instead of excluding them")
    summary.add_argument("--validate", action="store_true",
                         help="validate every record against the AttemptRecord model (slow)")
    summary.set_defaults(func=_run_summary)

    html = kinds.add_parser("html", help="write the run's self-contained report.html")
    html.add_argument("--run", default="latest", metavar="RUN",
                      help=f"{RUN_HELP} (default: latest)")
    add_out(html)
    html.add_argument("-o", "--output", type=Path, default=None, metavar="FILE",
                      help="where to write it (default: <run dir>/report.html)")
    html.set_defaults(func=_run_html)

    paired = kinds.add_parser("paired", help="paired comparison of two runs (A vs B)")
    add_run_pair(paired, "primary test (both are always reported; default mcnemar)")
    _add_format(paired, ("md", "csv", "json"))
    paired.set_defaults(func=_run_paired)

    comp = kinds.add_parser("compare", help="side by side: N runs, paired tests vs a baseline")
    comp.add_argument("runs", nargs="+", metavar="RUN", help=f"two or more runs: {RUN_HELP}")
    comp.add_argument("--baseline", default=None, metavar="RUN",
                      help="the run the others are tested against (default: the first; a run "
                           "not among RUN... is added in front)")
    add_method_and_pairing(comp)
    _add_format(comp, ("md", "csv", "json"))
    comp.add_argument("--csv", type=Path, default=None, metavar="FILE",
                      help="also write the full table (every run and scope) as CSV here")
    comp.set_defaults(func=_run_compare)
    _add_tasks(kinds)

    from pytest_agentbench.reporting.html.cli import add_html_commands

    add_html_commands(kinds)  # index, paired-html, compare-html

    gate = subparsers.add_parser("gate", help="regression gate: exit 1 if the candidate regressed")
    gate.add_argument("--baseline", required=True, metavar="A", help=f"baseline: {RUN_HELP}")
    gate.add_argument("--candidate", required=True, metavar="B", help=f"candidate: {RUN_HELP}")
    gate.add_argument("--max-drop", type=float, default=None,
                      help="largest allowed drop in pass rate, A - B (default 0.05 when "
                           "--margin is not given)")
    gate.add_argument("--margin", type=float, default=None,
                      help="non-inferiority margin: regression if the one-sided (1 - alpha) "
                           "bootstrap upper bound of A - B exceeds it")
    gate.add_argument("--inconclusive-ok", action="store_true",
                      help="exit 0 instead of 3 when the data cannot tell a regression of the "
                           "allowed size from none (too few tasks or attempts)")
    gate.add_argument("--sequential", action="store_true",
                      help="replay the anytime-valid sequential test over the candidate's tasks "
                           "in its recorded random order (as --agentbench-sequential ran it): "
                           "stop at the first task where it can say REGRESSION or OK")
    add_pairing(gate)
    _add_format(gate, ("md", "csv", "json"))
    gate.set_defaults(func=_run_gate)
    _add_plan(subparsers)


def _add_tasks(kinds: Any) -> None:
    tasks = kinds.add_parser("tasks", help="per task: pass rate per variant, which tasks "
                                           "discriminate, never or always passed")
    tasks.add_argument("runs", nargs="*", metavar="RUN",
                       help=f"runs to pool by variant: {RUN_HELP} (default: every run of the "
                            "output root)")
    tasks.add_argument("--min-spread", type=float, default=0.5,
                       help="a task discriminates when two variants' pass rates differ by at "
                            "least this (default 0.5)")
    tasks.add_argument("--infra-as-failure", action="store_true",
                       help="count infra errors as failures instead of dropping them")
    _add_format(tasks, ("md", "json"))
    tasks.set_defaults(func=_run_tasks)


def _run_tasks(args: argparse.Namespace) -> int:
    from pytest_agentbench.reporting.load import load_runs
    from pytest_agentbench.reporting.runs import output_root
    from pytest_agentbench.reporting.task_signal import render_tasks, runs_in, task_signal

    try:
        paths = ([run_dir(spec, args) for spec in args.runs] if args.runs
                 else runs_in(output_root(args.out)))
        data = task_signal(load_runs(paths, fields="summary"), min_spread=args.min_spread,
                           infra_as_failure=args.infra_as_failure)
    except ReportError as exc:
        return fail(exc)
    _emit(render_tasks(data, args.format), args.output)
    return EXIT_OK


def _add_plan(subparsers: Any) -> None:
    plan = subparsers.add_parser(
        "plan", help="tasks x attempts needed to detect a difference, from a pilot run or two",
        description="Sample size for a paired comparison (two-sided McNemar, Connor 1987): "
                    "from two pilot runs their observed discordance; from one, B is assumed to "
                    "be A shifted by --effect.")
    plan.add_argument("pilots", nargs="+", metavar="PILOT",
                      help=f"one or two pilot runs (A [B]): {RUN_HELP}")
    plan.add_argument("--effect", type=float, default=0.05,
                      help="difference in pass rate to detect, 0.001 to 1 (default 0.05 = 5 "
                           "points)")
    plan.add_argument("--alpha", type=float, default=0.05, help="two-sided level (default 0.05)")
    plan.add_argument("--power", type=float, default=0.8, help="power (default 0.8)")
    plan.add_argument("--attempts", type=int, default=1, metavar="K",
                      help="attempts per task in the planned runs (default 1)")
    plan.add_argument("--icc", type=float, default=None,
                      help="intraclass correlation within a task (default: from the pilot)")
    plan.add_argument("--missing", choices=("skip", "fail"), default="fail",
                      help="two pilots: drop (skip) or refuse (fail) unpaired tasks")
    plan.add_argument("--allow-mismatch", action="append", default=[], metavar="FIELD",
                      choices=("task_commit", "image", "limits", "harness_version"),
                      help="two pilots: accept a difference in this pairing field")
    add_resource_override(plan)
    plan.add_argument("--infra-as-failure", action="store_true",
                      help="count infra errors as failures instead of dropping them")
    _add_format(plan, ("md", "json"))
    plan.set_defaults(func=_run_plan)


def _add_format(parser: argparse.ArgumentParser, formats: Sequence[str]) -> None:
    parser.add_argument("--format", choices=formats, default="md")
    add_out(parser)
    parser.add_argument("-o", "--output", type=Path, default=None, metavar="FILE",
                        help="write the report here instead of standard output")


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)


def _run_summary(args: argparse.Namespace) -> int:
    from pytest_agentbench.reporting.load import load_run
    from pytest_agentbench.reporting.summary import summarize

    try:
        fields: Fields = "all" if args.format == "html" else "summary"
        run = load_run(run_dir(args.run, args), validate=args.validate, fields=fields)
        summary = summarize(run, infra_as_failure=args.infra_as_failure)
        if args.format == "html":
            from pytest_agentbench.reporting.html.run_page import render_html

            text = render_html(run, summary)
        else:
            from pytest_agentbench.reporting.render import render_summary

            text = render_summary(summary, args.format)
    except ReportError as exc:
        return fail(exc)
    _emit(text, args.output)
    return EXIT_OK


def _run_html(args: argparse.Namespace) -> int:
    from pytest_agentbench.reporting.html.run_page import write_html

    try:
        directory = run_dir(args.run, args)
        if not (directory / "attempts.jsonl").is_file():
            raise ReportError(f"{directory}: no attempts.jsonl (no attempt was recorded)")
        path = write_html(directory, args.output)
    except ReportError as exc:
        return fail(exc)
    print(f"wrote {path}")
    return EXIT_OK


def _run_paired(args: argparse.Namespace) -> int:
    from pytest_agentbench.reporting.render import render_paired

    try:
        report = paired_report(args)
    except ReportError as exc:
        return fail(exc)
    _emit(render_paired(report, args.format), args.output)
    return EXIT_OK


def _run_compare(args: argparse.Namespace) -> int:
    from pytest_agentbench.reporting.compare_render import compare_csv, render_compare

    try:
        report = compare_report(args, "compare")
    except ReportError as exc:
        return fail(exc)
    _emit(render_compare(report, args.format), args.output)
    if args.csv is not None:
        _emit(compare_csv(report), args.csv)
    return EXIT_OK


def _run_gate(args: argparse.Namespace) -> int:
    if args.sequential:
        return _run_sequential_gate(args)
    from pytest_agentbench.reporting.gate import gate
    from pytest_agentbench.reporting.render import render_gate

    try:
        run_a, run_b = load_pair(args.baseline, args.candidate, args)
        result = gate(run_a, run_b, max_drop=args.max_drop, margin=args.margin,
                      alpha=args.alpha, missing=args.missing,
                      allow_mismatch=args.allow_mismatch, seed=args.seed,
                      resamples=args.resamples, infra_as_failure=args.infra_as_failure,
                      inconclusive_ok=args.inconclusive_ok)
    except ReportError as exc:
        return fail(exc)
    _emit(render_gate(result, args.format), args.output)
    if args.format != "md":  # the verdict always reaches a human in CI logs
        print(result.data["verdict"], file=sys.stderr)
    return result.exit_code


def _run_sequential_gate(args: argparse.Namespace) -> int:
    from pytest_agentbench.reporting.sequential import render, sequential_gate

    try:
        if args.format == "csv":
            raise ReportError("gate --sequential writes md or json, not csv")
        run_a, run_b = load_pair(args.baseline, args.candidate, args)
        result = sequential_gate(run_a, run_b, max_drop=args.max_drop, margin=args.margin,
                                 alpha=args.alpha, seed=args.seed,
                                 allow_mismatch=args.allow_mismatch,
                                 infra_as_failure=args.infra_as_failure,
                                 inconclusive_ok=args.inconclusive_ok)
    except ReportError as exc:
        return fail(exc)
    _emit(render(result.data, args.format), args.output)
    if args.format != "md":
        print(result.data["reason"], file=sys.stderr)
    return result.exit_code


def _run_plan(args: argparse.Namespace) -> int:
    from pytest_agentbench.reporting.load import load_runs
    from pytest_agentbench.reporting.plan import plan, render_plan

    try:
        if len(args.pilots) > 2:
            raise ReportError(f"plan takes one or two pilot runs, got {len(args.pilots)}")
        runs = load_runs([run_dir(spec, args) for spec in args.pilots])
        data = plan(runs[0], runs[1] if len(runs) > 1 else None, effect=args.effect,
                    alpha=args.alpha, power_=args.power, attempts=args.attempts, icc=args.icc,
                    missing=args.missing, allow_mismatch=args.allow_mismatch,
                    infra_as_failure=args.infra_as_failure)
    except ReportError as exc:
        return fail(exc)
    _emit(render_plan(data, args.format), args.output)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentbench")
    add_report_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
