"""A harvested task on disk: task.yaml, oracle.patch (the fix part), tests.patch (the test
part, hidden from the agent: `validation.hidden_tests`) and harvest.json (where it came from:
the source repository, the commit and its date for contamination cut-offs, how the statement
and the setup were made, the FAIL_TO_PASS and PASS_TO_PASS tests)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_agentbench.harvest.runs import test_command
from pytest_agentbench.harvest.setup_infer import SetupPlan
from pytest_agentbench.harvest.verdict import CandidateVerdict

TASK_FILE, ORACLE, TESTS, PROVENANCE = "task.yaml", "oracle.patch", "tests.patch", "harvest.json"
MAX_COMMAND = 90_000  # characters; the spec allows 100,000


@dataclass(frozen=True)
class HarvestedTask:
    task_id: str
    suite: str
    repo_url: str  # as task.yaml names it (relative to the task dir)
    parent: str
    commit: str
    date: str
    source: str  # the repository it came from, credentials redacted
    description: str
    statement_source: str  # commit | tests
    plan: SetupPlan
    verdict: CandidateVerdict
    fix_patch: bytes
    tests_patch: bytes  # empty: the change has no test part, nothing is hidden
    labels: tuple[str, ...] = ("harvested",)


def commands(task: HarvestedTask) -> tuple[str, str] | None:
    """(failing_command, passing_command), or None when they would be too long."""
    failing = test_command(task.plan, list(task.verdict.fail_to_pass))
    passing = test_command(task.plan, [*task.verdict.fail_to_pass, *task.verdict.pass_to_pass])
    if len(passing) > MAX_COMMAND:
        return None
    return failing, passing


def spec(task: HarvestedTask) -> dict[str, Any]:
    failing, passing = commands(task) or ("", "")
    environment: dict[str, Any] = {"network_policy": task.plan.network_policy,
                                   "timeout_sec": 900, "tool_timeout_sec": 120}
    return {
        "task_spec_version": 1, "id": task.task_id, "suite": task.suite,
        "description": task.description,
        "labels": [*task.labels, task.verdict.kind],
        "repo": {"url": task.repo_url, "commit": task.parent},
        "environment": environment,
        "setup": {"commands": list(task.plan.commands)},
        "validation": {
            "failing_command": failing, "passing_command": passing,
            "expected_failing_tests": list(task.verdict.baseline_failing),
            **({"hidden_tests": TESTS} if task.tests_patch else {}),
        },
    }


def write(task: HarvestedTask, suite_dir: Path) -> Path:
    """Write the task into `suite_dir/<id>/` (through a temporary directory, so a crash never
    leaves half a task); returns the task directory."""
    final = suite_dir / task.task_id
    tmp = suite_dir / f".{task.task_id}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write_files(task, tmp)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    return final


def write_files(task: HarvestedTask, directory: Path, task_yaml: str | None = None) -> None:
    """The task's files into an existing `directory`; `task_yaml` replaces the plain dump."""
    text = task_yaml if task_yaml is not None else yaml.safe_dump(
        spec(task), sort_keys=False, allow_unicode=True, width=100)
    (directory / TASK_FILE).write_text(text, "utf-8")
    (directory / ORACLE).write_bytes(task.fix_patch)
    if task.tests_patch:
        (directory / TESTS).write_bytes(task.tests_patch)
    (directory / PROVENANCE).write_text(json.dumps(provenance(task), indent=2) + "\n", "utf-8")


def provenance(task: HarvestedTask) -> dict[str, Any]:
    return {
        "source": task.source, "commit": task.commit, "parent": task.parent,
        "commit_date": task.date, "kind": task.verdict.kind,
        "statement_source": task.statement_source,
        "setup": {"commands": list(task.plan.commands), "inferred_from": task.plan.source,
                  "manifests": dict(task.plan.manifests), "key": task.plan.key(),
                  "test_env": dict(task.plan.test_env)},
        "fail_to_pass": list(task.verdict.fail_to_pass),
        "pass_to_pass": list(task.verdict.pass_to_pass),
        "flaky_dropped": list(task.verdict.flaky),
    }
