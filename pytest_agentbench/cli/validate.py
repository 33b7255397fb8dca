"""`agentbench validate-tasks`: check a suite against the inclusion rules (taskpacks/README.md).

Without `--run` it only loads every task.yaml and prints each problem on one line. With `--run`
each valid task goes through the real pipeline twice, with the oracle and with nop: a task is
accepted when its baseline fails consistently, the oracle passes and nop fails with TESTS_FAILED.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any


def add_validate_command(sub: Any) -> None:
    cmd = sub.add_parser("validate-tasks", help="check task specs (and, with --run, behaviour)")
    cmd.add_argument("--suite", action="append", required=True)
    cmd.add_argument("--taskpacks", default="taskpacks")
    cmd.add_argument("--run", action="store_true", help="run oracle and nop on each task")
    cmd.add_argument("-k", dest="only", help="only task ids containing this text")
    cmd.set_defaults(func=validate_tasks)


def validate_tasks(args: argparse.Namespace) -> int:
    from pytest_agentbench.tasks.loader import discover

    loaded = discover(Path(args.taskpacks), args.suite)
    for problem in loaded.problems:
        print(f"INVALID {problem}")
    tasks = [t for t in loaded.tasks if not args.only or args.only in t.id]
    if not args.run:
        for task in tasks:
            print(f"OK      {task.id}: spec valid")
        return 1 if loaded.problems else 0
    bad = len(loaded.problems)
    with tempfile.TemporaryDirectory(prefix="agentbench-validate-") as tmp:
        runner = _Runner(Path(tmp))
        for task in tasks:
            ok, detail = runner.check(task)
            bad += not ok
            print(f"{'OK     ' if ok else 'REJECT '} {task.id}: {detail}", flush=True)
    print(f"{len(tasks) + len(loaded.problems) - bad} accepted, {bad} rejected")
    return 1 if bad else 0


class _Runner:
    def __init__(self, root: Path) -> None:
        from pytest_agentbench.repos import MirrorCache
        from pytest_agentbench.sandbox.docker import DockerSandboxFactory
        from pytest_agentbench.sandbox.image import ensure_image

        self.root, self.factory, self.mirrors = root, DockerSandboxFactory(), MirrorCache()
        info = ensure_image(quiet=True)
        self.image, self.image_id = info.name, info.image_id

    def check(self, task: Any) -> tuple[bool, str]:
        from pytest_agentbench.agents.builtin import NopAgent, OracleAgent
        from pytest_agentbench.core.trial import Trial, TrialConfig
        from pytest_agentbench.run.hostenv import trial_defaults

        records = {}
        for agent in (OracleAgent(), NopAgent()):
            cfg = TrialConfig(run_id=f"validate-{agent.name}", run_dir=self.root / "run",
                              work_root=self.root / "work", variant=agent.name,
                              variant_config_hash="validate", image=self.image,
                              image_id=self.image_id, harness_version="validate",
                              **trial_defaults())
            records[agent.name] = Trial(task, cfg, self.factory, self.mirrors, agent).run()
        oracle, nop = records["oracle"].result, records["nop"].result
        if nop.failure_reason not in (None, "TESTS_FAILED"):
            return False, f"{nop.failure_reason}: {nop.summary}"
        if nop.passed:
            return False, "passes under nop: nothing for an agent to fix"
        if not oracle.passed:
            return False, f"oracle fails: {oracle.failure_reason}: {oracle.summary}"
        return True, "baseline fails consistently, oracle passes, nop fails with TESTS_FAILED"
