"""`agentbench validate-tasks`: check a suite against the inclusion rules (taskpacks/README.md).

Without `--run` it only loads every task.yaml and prints each problem on one line. With `--run`
each valid task goes through the real pipeline with the oracle and with nop (`run/validation.py`,
the same check the doctor makes), then once per try of the exploit agent (`--exploit NAME` picks
some): a task is accepted when its baseline fails consistently, the oracle passes, nop fails
with TESTS_FAILED and no exploit gets through. Each try gets a line (how it was stopped); a
hard-coding try that passes is a `WARN` line naming the weak tests. With `--adequacy` each
accepted task also gets its test-adequacy score (run/adequacy.py: the share of the oracle
patch's mutants its tests catch; `--exploit none` skips the exploit tries); below
`--adequacy-threshold` it is a `WARN` line naming the surviving mutants. `--json FILE` writes
every task's verdict, tries and adequacy as JSON. Every `--run` also keeps each task's verdict
and adequacy, with the task's content fingerprint and commit, in the output root's
`.validation/<suite>/<task>.json` (`--out DIR`, reporting/validations.py), where the run page
and `report tasks` find it for runs of that same task content. Exit status: 0 all
accepted, 1 some rejected, 2 no taskpacks or a bad option, 10 no Docker engine or runner image
(one line).

The taskpacks are `--taskpacks DIR` (relative to the cwd) if given, else the project's: ini
`agentbench_taskpacks` relative to the project root, else `<root>/taskpacks`, the root found
from the cwd as pytest finds its rootdir (paths/project.py), so it works from a subdirectory.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

INFRA_ERROR = 10  # as a run's exit status: nothing could be checked, no task was judged

if TYPE_CHECKING:
    from pytest_agentbench.core.attempt_config import SharedAttemptConfig
    from pytest_agentbench.repos.mirror import MirrorCache
    from pytest_agentbench.sandbox.port import SandboxFactory


def add_validate_command(sub: Any) -> None:
    cmd = sub.add_parser("validate-tasks", help="check task specs (and, with --run, behaviour)")
    cmd.add_argument("--suite", action="append", required=True)
    cmd.add_argument("--taskpacks", default=None, metavar="DIR",
                     help="taskpacks directory (default: ini agentbench_taskpacks, else "
                          "taskpacks/, under the project root)")
    cmd.add_argument("--run", action="store_true",
                     help="run oracle, nop and every exploit try on each task")
    cmd.add_argument("--exploit", action="append", default=None, metavar="NAME",
                     help="with --run: only this exploit try (repeatable; default: all)")
    cmd.add_argument("--adequacy", action="store_true",
                     help="with --run: grade mutants of each oracle patch (test adequacy)")
    cmd.add_argument("--adequacy-threshold", type=_share, default=None, metavar="SHARE",
                     help="with --adequacy: warn below this share of mutants caught "
                          "(0..1, default 0.6)")
    cmd.add_argument("--adequacy-max", type=_positive, default=None, metavar="N",
                     help="with --adequacy: grade at most N mutants per task (default 40)")
    cmd.add_argument("--json", dest="json_out", default=None, metavar="FILE",
                     help="with --run: also write each task's verdict as JSON to FILE")
    cmd.add_argument("--sandbox", choices=("docker", "local"), default="docker",
                     help="with --run: docker (default), or local (no isolation: the tries "
                          "that need it are skipped)")
    cmd.add_argument("--out", type=Path, default=None, metavar="DIR",
                     help="with --run: the output root whose .validation/ keeps each task's "
                          "result for the reports (default: ini agentbench_out, else "
                          "reports/runs, under the project root)")
    cmd.add_argument("-k", dest="only", help="only task ids containing this text")
    cmd.set_defaults(func=validate_tasks)


def validate_tasks(args: argparse.Namespace) -> int:
    from pytest_agentbench.paths.project import find_project
    from pytest_agentbench.tasks.discovery import discover

    taskpacks = Path(args.taskpacks) if args.taskpacks else find_project().taskpacks
    if not taskpacks.is_dir():
        print(f"agentbench validate-tasks: no taskpacks directory at {taskpacks} "
              "(pass --taskpacks DIR or set agentbench_taskpacks in the pytest ini)",
              file=sys.stderr)
        return 2
    loaded = discover(taskpacks, args.suite)
    for problem in loaded.problems:
        print(f"INVALID {problem}")
    tasks = [t for t in loaded.tasks if not args.only or args.only in t.id]
    if not args.run and (args.adequacy or args.json_out):
        print("agentbench validate-tasks: --adequacy and --json need --run", file=sys.stderr)
        return 2
    if not args.run:
        return _check_statically(tasks, len(loaded.problems))
    from pytest_agentbench.agents.exploit_tries import TRIES
    from pytest_agentbench.run.validation import validate_task
    from pytest_agentbench.sandbox.docker.image import ImageBuildError

    unknown = sorted(set(args.exploit or ()) - set(TRIES) - {"none"})
    if unknown:
        print(f"agentbench validate-tasks: --exploit: unknown {', '.join(unknown)} (known: "
              f"{', '.join(TRIES)}, or none)", file=sys.stderr)
        return 2
    exploits = tuple(e for e in args.exploit if e != "none") if args.exploit else True
    adequacy = _adequacy_options(args)
    if isinstance(adequacy, str):
        print(f"agentbench validate-tasks: {adequacy}", file=sys.stderr)
        return 2
    verdicts: dict[str, Any] = {}
    kept = args.out.expanduser().resolve() if args.out else find_project().out
    bad, warned = len(loaded.problems), 0
    with tempfile.TemporaryDirectory(prefix="agentbench-validate-") as tmp:
        try:
            shared, sandboxes, mirrors = _throwaway_run(Path(tmp), args.sandbox)
        except ImageBuildError as exc:  # no engine, or no image: nothing can run (infrastructure)
            print(f"agentbench validate-tasks --run: {exc}", file=sys.stderr)
            return INFRA_ERROR
        for task in tasks:
            result = validate_task(task, shared, sandboxes, mirrors, exploits=exploits,
                                   adequacy=adequacy)
            verdicts[task.id] = result.to_dict()
            _keep(kept, task, result)
            bad += not result.ok
            warned += bool(result.warnings)
            print(f"{'OK     ' if result.ok else 'REJECT '} {task.id}: {result.detail}", flush=True)
            tail = _setup_tail(shared.run_dir, result.oracle)
            if tail:  # what pytest's ERROR text shows below a failed setup command
                print(tail, flush=True)
            for tried in result.exploits:
                print(f"        {tried.line()}", flush=True)
            if result.adequacy is not None:
                print(f"        {result.adequacy.line()}", flush=True)
            for warning in result.warnings:
                print(f"WARN    {task.id}: {warning}", flush=True)
    if args.json_out:
        _write_json(Path(args.json_out), verdicts)
    if tasks:
        print(f"results kept for the reports under {kept / '.validation'}")
    weak = f", {warned} with weak tests" if warned else ""
    print(f"{len(tasks) + len(loaded.problems) - bad} accepted, {bad} rejected{weak}")
    return 1 if bad else 0


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a share from 0 to 1, got {text!r}")
    return value


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def _adequacy_options(args: argparse.Namespace) -> Any:
    """`--adequacy`'s options (run/validation.py AdequacyOptions), None without it, or the
    one-line problem when its options are given without it."""
    from pytest_agentbench.run.validation import AdequacyOptions

    given = args.adequacy_threshold is not None or args.adequacy_max is not None
    if not args.adequacy:
        return "--adequacy-threshold and --adequacy-max need --adequacy" if given else None
    default = AdequacyOptions()
    return AdequacyOptions(
        max_mutants=args.adequacy_max or default.max_mutants,
        threshold=default.threshold if args.adequacy_threshold is None
        else args.adequacy_threshold)


def _write_json(path: Path, verdicts: dict[str, Any]) -> None:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"tasks": verdicts}, indent=2, sort_keys=True) + "\n", "utf-8")


def _keep(root: Path, task: Any, result: Any) -> None:
    """The task's verdict and adequacy under `root`'s .validation/ (reporting/validations.py),
    with the fingerprint of its content and the commit its oracle attempt resolved."""
    from datetime import UTC, datetime

    from pytest_agentbench import __version__
    from pytest_agentbench.reporting.validations import write_validation
    from pytest_agentbench.tasks.fingerprint import task_fingerprint

    entry = {**result.to_dict(), "fingerprint": task_fingerprint(task.task_dir),
             "task_commit": result.oracle.get("task_commit"),
             "validated_at": datetime.now(UTC).isoformat(timespec="seconds"),
             "harness_version": __version__}
    try:
        write_validation(root, task.spec.suite, task.id, entry)
    except OSError as exc:
        print(f"agentbench validate-tasks: cannot keep the result under {root}: {exc}",
              file=sys.stderr)


def _setup_tail(run_dir: Path, record: dict[str, Any]) -> str:
    """The failed setup command's last lines (core/before_agent.py kept them, redacted and
    bounded) when `record` is a SETUP_FAILED one, else ""."""
    from pytest_agentbench.core.before_agent import SETUP_TAIL_LOG

    task_dir = (record.get("artifact_paths") or {}).get("task_dir")
    if (record.get("result") or {}).get("failure_reason") != "SETUP_FAILED" or not task_dir:
        return ""
    try:
        tail = (run_dir / task_dir / "logs" / SETUP_TAIL_LOG).read_text("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(f"      {line}" for line in tail.rstrip("\n").splitlines())


def _check_statically(tasks: list[Any], problems: int) -> int:
    """Each loaded task's reference solution, checked without a sandbox (run/oracle_check.py):
    a task the oracle cannot solve is no valid task, whatever its spec says."""
    from pytest_agentbench.repos.mirror import MirrorCache
    from pytest_agentbench.run.oracle_check import oracle_problem
    from pytest_agentbench.tasks.loader import display_path

    mirrors = MirrorCache()
    for task in tasks:
        problem = oracle_problem(task, mirrors)
        if problem:
            problems += 1
            print(f"INVALID {display_path(task.path)}: oracle.patch: {problem}")
        else:
            print(f"OK      {task.id}: spec valid, oracle.patch applies")
    return 1 if problems else 0


def _throwaway_run(
    root: Path, kind: str = "docker"
) -> tuple[SharedAttemptConfig, SandboxFactory, MirrorCache]:
    """Docker sandboxes with the current runner image (or local ones), attempts under `root`."""
    from pytest_agentbench.core.attempt_config import SharedAttemptConfig
    from pytest_agentbench.repos.mirror import MirrorCache
    from pytest_agentbench.run.factory import sandbox_factory
    from pytest_agentbench.run.hostenv import attempt_defaults
    from pytest_agentbench.sandbox.docker.image import ensure_image

    sandboxes, mirrors = sandbox_factory(kind), MirrorCache()
    if kind == "local":
        shared = SharedAttemptConfig(
            run_id="validate", run_dir=root / "run", work_root=root / "work",
            variant="validate", variant_config_hash="validate", image="local",
            harness_version="validate")
        return shared, sandboxes, mirrors
    info = ensure_image(quiet=True)
    shared = SharedAttemptConfig(
        run_id="validate", run_dir=root / "run", work_root=root / "work", variant="validate",
        variant_config_hash="validate", image=info.name, image_id=info.image_id,
        harness_version="validate", **attempt_defaults())
    return shared, sandboxes, mirrors
