"""`agentbench task new [COMMIT]`: a validated task from one change of the current repository.

The change is COMMIT (default HEAD) against its first parent, or `--bug A --fix B`. The task
folder `<out>/<suite>/<id>/` gets a commented task.yaml, oracle.patch (the change's source part),
tests.patch (its test part, hidden from the agent) and harvest.json (where it came from); the
repository is named portably (see pytest_agentbench/harvest/single.py). It is written only after
the oracle passes and nop fails on it. Exit status: 0 written, 1 no task (one line saying why),
2 a bad option, 10 no Docker engine or runner image.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

INFRA_ERROR = 10


def add_task_command(sub: Any) -> None:
    task = sub.add_parser("task", help="make a task").add_subparsers(dest="task_cmd",
                                                                     required=True)
    cmd = task.add_parser(
        "new", help="a validated task from a fix commit of the current repository",
        description="Make a task from a fix commit (or --bug A --fix B) of the current git "
                    "repository, validate it (oracle passes, nop fails) and only then write it.")
    cmd.add_argument("commit", nargs="?", default=None, metavar="COMMIT",
                     help="the fix commit; the task starts from its first parent (default HEAD)")
    cmd.add_argument("--bug", default=None, metavar="REV",
                     help="the commit the agent starts from (default: the fix's parent)")
    cmd.add_argument("--fix", default=None, metavar="REV", help="the fixed commit (as COMMIT)")
    cmd.add_argument("--suite", default=None,
                     help="the suite folder the task goes into (default: the repository's name)")
    cmd.add_argument("--id", dest="task_id", default=None,
                     help="the task's id and folder name (default: SUITE-<commit sha>)")
    cmd.add_argument("--out", default=None, metavar="DIR",
                     help="taskpacks directory (default: the project's, as validate-tasks)")
    cmd.add_argument("--repo", default=".", metavar="DIR",
                     help="the git repository (default: the one holding the current directory)")
    cmd.add_argument("--setup", action="append", default=[], metavar="CMD",
                     help="setup command (repeatable); default: inferred from the project files")
    cmd.add_argument("--statement", default="commit", metavar="commit|tests|TEXT",
                     help="what the agent is told: the commit message cleaned of references "
                          "and of the fix's code (commit, the default), the failing tests "
                          "(tests), or TEXT itself (refused if it repeats the fix's code)")
    cmd.add_argument("--tests", action="append", default=[], metavar="PATH",
                     help="test module to run (repeatable); default: those the change touches, "
                          "else every test module")
    cmd.add_argument("--repo-ref", choices=("auto", "path", "bundle"), default="auto",
                     help="how task.yaml names the repository: path (../../.., when the "
                          "taskpacks are inside it), bundle (_shared/SUITE.bundle in the "
                          "taskpacks), auto (path when possible; the default)")
    cmd.add_argument("--sandbox", choices=("docker", "local"), default="docker",
                     help="docker (default), or local (no isolation)")
    cmd.add_argument("--gate-runs", type=int, default=1, metavar="N",
                     help="oracle and nop attempts the task must pass / fail (default 1)")
    cmd.add_argument("--exploit-gate", action="store_true",
                     help="also run the exploit agent's tries (about 18 more attempts)")
    cmd.add_argument("--force", action="store_true", help="replace a task with the same id")
    cmd.set_defaults(func=task_new, parser=cmd)


def task_new(args: argparse.Namespace) -> int:
    from pytest_agentbench.cli.harvest import _bench, _project_taskpacks
    from pytest_agentbench.harvest.single import Request, TaskNewError, make_task
    from pytest_agentbench.repos.gitcmd import GitFailed, RepoError, run_git
    from pytest_agentbench.repos.mirror import MirrorCache
    from pytest_agentbench.sandbox.docker.image import ImageBuildError

    def fail(message: str, code: int) -> int:
        print(f"agentbench task new: {message}", file=sys.stderr)
        return code

    try:
        top = Path(run_git(["-C", str(Path(args.repo).absolute()), "rev-parse",
                            "--show-toplevel"], timeout=60).strip())
    except GitFailed:
        return fail(f"{args.repo}: not inside a git work tree (pass --repo DIR)", 2)
    problem = _bad_args(args)
    if problem:
        return fail(problem, 2)
    suite = args.suite or re.sub(r"[^A-Za-z0-9._-]+", "-", top.name).strip("-._") or "tasks"
    out = (Path(args.out) if args.out else _project_taskpacks()).absolute()
    request = Request(repo=top, fix=args.fix or args.commit or "HEAD", bug=args.bug,
                      suite=suite, out=out, task_id=args.task_id, setup=tuple(args.setup),
                      statement=args.statement, tests=tuple(args.tests),
                      repo_ref=args.repo_ref, force=args.force)
    with tempfile.TemporaryDirectory(prefix="agentbench-task-new-") as tmp:
        try:
            bench, gate = _bench(Path(tmp), str(top), args.gate_runs, args.exploit_gate,
                                 args.sandbox)
            # the staged task's repository is checked out into a throwaway cache
            gate = replace(gate, mirrors=MirrorCache(Path(tmp) / "gate-mirrors"))
            final = make_task(request, bench, gate)
        except ImageBuildError as exc:
            return fail(str(exc), INFRA_ERROR)
        except TaskNewError as exc:
            return fail(str(exc), exc.code)
        except RepoError as exc:
            return fail(str(exc), 1)
        except OSError as exc:  # e.g. the taskpacks directory's parent is not writable
            return fail(f"{exc.filename or ''}: {exc.strerror or exc}", 1)
    shown = _shown(final)
    print(f"task new: wrote {shown} (oracle passed, nop failed); run it with "
          f"`pytest --agentbench-suite {suite}`")
    return 0


def _bad_args(args: argparse.Namespace) -> str | None:
    from pytest_agentbench.schemas.task import TASK_ID_PATTERN

    if args.commit and args.fix:
        return "give the fix commit once: COMMIT or --fix"
    for option, value in (("--suite", args.suite), ("--id", args.task_id)):
        if value is not None and (not re.match(TASK_ID_PATTERN, value)
                                  or value.startswith(("_", "."))):
            return (f"{option} {value!r}: expected letters, digits and ._- "
                    "(not starting with _ or .)")
    if not 1 <= args.gate_runs <= 100:
        return f"--gate-runs {args.gate_runs}: expected 1 to 100"
    if not args.statement.strip():
        return "--statement: empty"
    return None


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
