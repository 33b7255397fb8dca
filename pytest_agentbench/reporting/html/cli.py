"""`agentbench report index|paired-html|compare-html`: the HTML pages beyond the run page.

reporting/cli.py calls `add_html_commands(kinds)` with its `report` subparsers. Exit codes as
the other report commands: 0, or 2 on bad input (no such run or root, a refused pairing).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_agentbench.reporting.cli_args import (
    RUN_HELP,
    add_method_and_pairing,
    add_out,
    add_run_pair,
    compare_report,
    fail,
    paired_report,
)
from pytest_agentbench.reporting.names import ReportError

EXIT_OK = 0


def add_html_commands(kinds: Any) -> None:
    """Add `index`, `paired-html` and `compare-html` to the `report` subparsers."""
    index = kinds.add_parser("index", help="write index.html: every run under the output root")
    index.add_argument("root", nargs="?", type=Path, default=None,
                       help="the output root (default: --out, else the project's)")
    add_out(index)
    index.add_argument("-o", "--output", type=Path, default=None, metavar="FILE",
                       help="where to write it (default: <root>/index.html)")
    index.set_defaults(func=run_index)

    paired = kinds.add_parser("paired-html", help="the paired page: A vs B per task, as HTML")
    add_run_pair(paired, out=True)
    paired.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    paired.set_defaults(func=run_paired_html)

    comp = kinds.add_parser("compare-html",
                            help="the compare page: N runs, cost vs pass-rate frontier, as HTML")
    comp.add_argument("runs", nargs="+", metavar="RUN", help=RUN_HELP)
    comp.add_argument("--baseline", default=None, metavar="RUN",
                      help="the run the others are paired against (default: the first)")
    add_out(comp)
    add_method_and_pairing(comp)
    comp.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    comp.set_defaults(func=run_compare_html)


def wrote(write: Callable[[], Path]) -> int:
    """Write one page: "wrote <path>" and 0, or the bad input's one line and 2."""
    try:
        path = write()
    except ReportError as exc:
        return fail(exc)
    print(f"wrote {path}")
    return EXIT_OK


def run_index(args: argparse.Namespace) -> int:
    from pytest_agentbench.reporting.html.index import write_index
    from pytest_agentbench.reporting.runs import output_root

    return wrote(lambda: write_index(args.root if args.root is not None
                                     else output_root(args.out), args.output))


def run_paired_html(args: argparse.Namespace) -> int:
    from pytest_agentbench.reporting.html.pages import write_paired_html

    return wrote(lambda: write_paired_html(paired_report(args), args.output))


def run_compare_html(args: argparse.Namespace) -> int:
    from pytest_agentbench.reporting.html.pages import write_compare_html

    return wrote(lambda: write_compare_html(compare_report(args, "compare-html"), args.output))
