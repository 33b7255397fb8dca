"""`agentbench replay --run RUN --task TASK_ID`: re-execute an attempt's recorded tool calls
in a fresh sandbox, with no model, and say whether the recorded outcome reproduces. RUN is a run
directory, a run name in the output root, or `latest`, as for the report commands.

The replay runs the whole attempt (prepare → setup → baseline → scripted agent → score) on the
frozen task.yaml of the run, so a difference points at the harness, the task or the environment
(flaky tests, a changed runner image), not at the model. Verdicts the recorded agent reached on its
own (AGENT_STUCK, AGENT_GAVE_UP, AGENT_NO_PROGRESS, PATCH_REJECTED, the task budget) cannot come
out of replaying its tool calls; they are carried over from the record and apply only when the
replayed tests fail again, exactly as they did in the original attempt. Artifacts go to
`<run>/replays/<task>-<timestamp>/`. Exit status: 0 reproduced, 1 not reproduced, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_replay_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "replay", help="re-execute a recorded attempt's tool calls without a model",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, metavar="RUN",
                        help="a run directory, a run name in the output root, or `latest`")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="output root where run names and `latest` are looked up (default: "
                             "ini agentbench_out, else reports/runs, under the project root)")
    parser.add_argument("--task", required=True, metavar="TASK_ID")
    parser.add_argument("--attempt", type=int, metavar="N",
                        help="which attempt (1-based) when the run has several")
    parser.add_argument("--taskpacks", type=Path, default=Path("taskpacks"), metavar="DIR",
                        help="where to find the original task directory (default: taskpacks)")
    parser.add_argument("--sandbox", choices=["docker", "local"], default="docker")
    parser.add_argument("--image", metavar="IMAGE", help="runner image (default: the current "
                        "runner image, built when needed)")
    parser.add_argument("--git-cache", type=Path, metavar="DIR", help="mirror cache directory")
    parser.set_defaults(func=run_replay)


def run_replay(args: argparse.Namespace) -> int:
    from pytest_agentbench.cli.replay_attempt import ReplayError, replay
    from pytest_agentbench.reporting.names import ReportError
    from pytest_agentbench.reporting.runs import resolve_run

    try:  # as the report commands name a run
        args.run = resolve_run(args.run, args.out)
    except ReportError as exc:
        print(f"agentbench replay: --run {exc}", file=sys.stderr)
        return 2
    try:
        return replay(args)
    except ReplayError as exc:
        print(f"agentbench replay: {exc}", file=sys.stderr)
        return 2
