"""`agentbench harvest SOURCE --suite NAME`: tasks from a repository's own history.

SOURCE is a local clone, a bare repository, a git bundle or any URL the mirror cache accepts.
The tasks land in `--out DIR/NAME/<task-id>/` (default: the project's taskpacks directory), with
the repository as a bundle in `DIR/_shared/NAME.bundle` (the suite is hermetic) and the funnel
report beside the tasks. The pipeline is pytest_agentbench/harvest/pipeline.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def add_harvest_command(sub: Any) -> None:
    cmd = sub.add_parser("harvest", help="make validated tasks from a repository's history")
    cmd.add_argument("source", help="a local clone, bare repository, git bundle or URL")
    cmd.add_argument("--suite", required=True, help="the suite the tasks go into")
    cmd.add_argument("--out", default=None, metavar="DIR",
                     help="taskpacks directory (default: the project's, as validate-tasks)")
    cmd.add_argument("--range", dest="rev_range", default="HEAD", metavar="REV..REV",
                     help="the first-parent history to walk (default: all of HEAD)")
    cmd.add_argument("--max-commits", type=int, default=None, metavar="N")
    cmd.add_argument("--setup", action="append", default=[], metavar="CMD",
                     help="setup command (repeatable); default: inferred per commit")
    cmd.add_argument("--workers", type=int, default=2, metavar="N")
    cmd.add_argument("--statement", choices=["commit", "tests"], default="commit",
                     help="the task description: the cleaned commit message, or the tests")
    cmd.add_argument("--gate-runs", type=int, default=3, metavar="N",
                     help="oracle and nop attempts each task must pass / fail (default 3)")
    cmd.add_argument("--exploit-gate", action="store_true",
                     help="also run the exploit agent's tries on each task (about 18 more "
                          "attempts a task); a task an exploit passes is not kept")
    cmd.add_argument("--max-fix-files", type=int, default=10, metavar="N")
    cmd.add_argument("--max-fix-lines", type=int, default=400, metavar="N")
    cmd.add_argument("--fresh", action="store_true",
                     help="forget an earlier harvest into this suite and start again")
    cmd.add_argument("--redo", action="append", default=[], metavar="REASON",
                     help="decide again the commits an earlier harvest dropped for REASON "
                          "(repeatable), e.g. SETUP_FAILED after fixing the setup")
    cmd.set_defaults(func=harvest)


def harvest(args: argparse.Namespace) -> int:
    from pytest_agentbench.harvest.classify import ChangeLimits
    from pytest_agentbench.harvest.pipeline import HarvestError, Options, run_harvest
    from pytest_agentbench.repos.gitcmd import RepoError

    problem = _bad_args(args)
    if problem:
        print(f"agentbench harvest: {problem}", file=sys.stderr)
        return 2
    source = _source(args.source)
    out = Path(args.out) if args.out else _project_taskpacks()
    options = Options(source=source, suite=args.suite, out=out.absolute(),
                      rev_range=args.rev_range, max_commits=args.max_commits,
                      setup=tuple(args.setup), workers=args.workers, statement=args.statement,
                      limits=ChangeLimits(fix_files=args.max_fix_files,
                                          fix_lines=args.max_fix_lines),
                      fresh=args.fresh, redo=frozenset(args.redo))
    with tempfile.TemporaryDirectory(prefix="agentbench-harvest-") as tmp:
        try:
            bench, gate = _bench(Path(tmp), source, args.gate_runs, args.exploit_gate)
            run_harvest(options, bench, gate)
        except (HarvestError, RepoError) as exc:
            print(f"agentbench harvest: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("agentbench harvest: interrupted; run the same command to resume",
                  file=sys.stderr)
            return 130
    return 0


def _bad_args(args: argparse.Namespace) -> str | None:
    import re

    from pytest_agentbench.schemas.task import TASK_ID_PATTERN

    if not re.match(TASK_ID_PATTERN, args.suite) or args.suite.startswith(("_", ".")):
        return (f"--suite {args.suite!r}: expected letters, digits and ._- "
                "(not starting with _ or .)")
    for name in ("workers", "gate_runs", "max_fix_files", "max_fix_lines"):
        value = getattr(args, name)
        if not 1 <= value <= 10_000:
            return f"--{name.replace('_', '-')} {value}: expected 1 to 10000"
    if args.max_commits is not None and args.max_commits < 1:
        return f"--max-commits {args.max_commits}: expected at least 1"
    return None


def _source(source: str) -> str:
    """A local path becomes absolute (the mirror cache takes absolute paths and URLs)."""
    from pytest_agentbench.repos.sources import is_url

    if is_url(source):
        return source
    return str(Path(source).expanduser().resolve())


def _project_taskpacks() -> Path:
    from pytest_agentbench.paths.project import find_project

    return find_project().taskpacks


def _bench(tmp: Path, source: str, gate_runs: int, exploits: bool,
           sandbox: str | None = None) -> tuple[Any, Any]:
    from pytest_agentbench.core.attempt_config import SharedAttemptConfig
    from pytest_agentbench.harvest.gate import Gate
    from pytest_agentbench.harvest.runs import Bench
    from pytest_agentbench.repos.mirror import MirrorCache
    from pytest_agentbench.run.factory import sandbox_factory
    from pytest_agentbench.run.hostenv import attempt_defaults
    from pytest_agentbench.sandbox.docker.image import ensure_image

    sandbox = sandbox or os.environ.get("AGENTBENCH_HARVEST_SANDBOX", "docker")
    sandboxes, mirrors = sandbox_factory(sandbox), MirrorCache()
    defaults = attempt_defaults(sandbox)
    if sandbox == "docker":
        info = ensure_image(quiet=True)
        image, image_id = info.name, info.image_id
    else:
        image, image_id = "local", None
    bench = Bench(sandboxes=sandboxes, mirrors=mirrors, url=source, image=image,
                  work_root=tmp / "work", env_root=tmp / "envs",
                  owner_uid=defaults["owner_uid"], ca_bundle=defaults["ca_bundle"],
                  pip_cache=defaults["pip_cache"])
    bench.work_root.mkdir()
    shared = SharedAttemptConfig(
        run_id="harvest", run_dir=tmp / "run", work_root=tmp / "gate-work",
        variant="validate", variant_config_hash="validate", image=image, image_id=image_id,
        harness_version="harvest", **defaults)
    return bench, Gate(shared, sandboxes, mirrors, runs=gate_runs, exploits=exploits)
