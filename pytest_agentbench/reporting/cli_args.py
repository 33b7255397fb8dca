"""Arguments the `report` commands share (reporting/cli.py and html_cli.py): the output root,
the pairing options, the help text for a run."""

from __future__ import annotations

import argparse
from pathlib import Path

RUN_HELP = "a run directory, a run name in the output root, or `latest`"


def add_out(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="output root where run names and `latest` are looked up (default: "
                             "ini agentbench_out, else reports/runs, under the project root)")


def add_pairing(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--missing", choices=("skip", "fail"), default="fail",
                        help="tasks or attempts present in only one run: drop them (skip) or "
                             "refuse (fail, default)")
    parser.add_argument("--allow-mismatch", action="append", default=[], metavar="FIELD",
                        choices=("task_commit", "image", "limits", "harness_version"),
                        help="accept a difference in this pairing field (repeatable)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--resamples", type=int, default=10_000,
                        help="bootstrap resamples (default 10000)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level")
    parser.add_argument("--infra-as-failure", action="store_true",
                        help="count infra errors as failures instead of dropping those pairs")
