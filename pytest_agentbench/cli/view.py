"""`agentbench view [OUT_DIR]`: a local web viewer over an output root, live while runs go.

OUT_DIR is the output root (default: ini agentbench_out, else reports/runs under the project
root); a folder whose `runs/` holds the runs (`reports/`) is taken to mean that `runs/`. The viewer
listens on 127.0.0.1 only (--port, default 8765; 0 picks a free one), prints its URL and serves
until Ctrl-C. It reads the root and writes nothing there but the runs index's figure cache
(`.index_cache.json`, as `agentbench report index`). Exit status: 0 after Ctrl-C, 2 when it cannot
start (no such root, the port in use).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DEFAULT_PORT = 8765
EXIT_BAD_INPUT = 2


def add_view_command(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "view", help="a live local web viewer over the runs of an output root",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", nargs="?", type=Path, default=None, metavar="OUT_DIR",
                        help="the output root (default: ini agentbench_out, else reports/runs)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"loopback port to listen on (default {DEFAULT_PORT}; 0: any free)")
    parser.set_defaults(func=run_view)


def pick_root(given: Path | None) -> Path:
    """The output root: `given` (or its `runs/` when the runs are there), else the project's."""
    from pytest_agentbench.reporting.runs import output_root
    from pytest_agentbench.viewer.confine import run_names

    root = output_root(given)
    runs = root / "runs"
    if given is not None and not run_names(root) and runs.is_dir() and run_names(runs):
        return runs
    return root


def run_view(args: argparse.Namespace) -> int:
    from pytest_agentbench.viewer.server import Viewer, ViewerError

    if not 0 <= args.port <= 65535:
        print(f"agentbench view: --port {args.port}: expected 0..65535", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        viewer = Viewer(pick_root(args.root), port=args.port)
    except ViewerError as exc:
        print(f"agentbench view: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"agentbench view: serving {viewer.root} at {viewer.url} (Ctrl-C to stop)", flush=True)
    try:
        viewer.serve_forever()
    except KeyboardInterrupt:
        print("agentbench view: stopped", file=sys.stderr)
    finally:
        viewer.close()
    return 0
