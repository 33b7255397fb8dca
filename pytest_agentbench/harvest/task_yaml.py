"""A task.yaml for people: the spec `agentbench task new` made, each section under comments that
say what its fields mean and what a user may want to change. The values are yaml.safe_dump's
(so the file loads back to exactly the spec); the defaults quoted come from the schema itself.
"""

from __future__ import annotations

from typing import Any

import yaml

from pytest_agentbench.schemas.task import AgentSpec, EnvironmentSpec


def _defaults() -> str:
    env = EnvironmentSpec()
    return (f"network_policy {env.network_policy},\ncpu_limit {env.cpu_limit:g}, "
            f"mem_limit_mb {env.mem_limit_mb}, pids_limit {env.pids_limit}, disk_limit_mb "
            f"{env.disk_limit_mb} (the workspace, .git included),\ntimeout_sec "
            f"{env.timeout_sec:g} (the agent's own time), tool_timeout_sec "
            f"{env.tool_timeout_sec:g} (one command), setup_timeout_sec "
            f"{env.setup_timeout_sec:g}.")


def _comments(key: str, spec: dict[str, Any]) -> str:
    suite, task_id = spec["suite"], spec["id"]
    text = {
        "task_spec_version": f"""\
Made by `agentbench task new`. Check it after a change with
  agentbench validate-tasks --suite {suite} --run -k {task_id}
and run it with `pytest --agentbench-suite {suite}`. The full schema: the taskpacks README of
pytest-agentbench ("Schema (task spec v1)"). Unknown keys are errors.""",
        "id": "The task's name in runs, reports and `-k`; must equal this folder's name.",
        "suite": "The folder above this one (`pytest --agentbench-suite SUITE` runs it).",
        "description": """\
What the agent is told (its prompt starts `Task: ` and this text). Describe the symptom as a
user would report it; never the fix: no code from oracle.patch, no file or line to change.""",
        "labels": """\
Keywords for `pytest -k`; the label `flaky` quarantines the task (it runs, is not counted).""",
        "repo": """\
Where the code comes from.
  url: a path relative to this file: `../../..`-style paths name the git repository that holds
       the taskpacks directory (works in every clone that has these commits); a
       `../../_shared/NAME.bundle` is a git bundle inside the taskpacks (hermetic). Or an
       https://, ssh:// or file:/// URL.
  commit: what the agent starts from (the commit before the fix, or --bug).""",
        "environment": f"""\
The sandbox. Left out, a field has its default: {_defaults()}
  network_policy: none | setup_only (setup may download, the agent may not) | always.""",
        "setup": """\
Commands run in the repository before the agent starts (as the runner's user, installs land in
/env); inferred from the project's files: replace them if your project needs others.""",
        "validation": """\
How the attempt is judged.
  failing_command: fails before the fix (checked twice, the baseline), must pass at the end.
  passing_command: must pass at the end: the fixed tests and those that passed before.
  expected_failing_tests: what the baseline must show failing (a typo there rejects the task).
  hidden_tests: the fix commit's own test changes, applied for the baseline and at scoring;
    the agent never sees them. Drop the line (and tests.patch) to hide nothing.""",
        "oracle": """\
The reference solution: a git patch in this folder, applied by `--agentbench-variant oracle`
and by validate-tasks. Regenerate it with `git diff BUG FIX -- <source files>`.""",
    }.get(key, "")
    return "\n".join(f"# {line}".rstrip() for line in text.splitlines())


def _agent_example() -> str:
    agent = AgentSpec()
    return "\n".join([
        "# Optional: limits for the agent, e.g.",
        "# agent:",
        f"#   max_steps: {agent.max_steps}                  # model turns (the default)",
        '#   editable_globs: ["mypkg/**/*.py"]   # edits elsewhere are refused',
        "#   max_changed_files: 3",
        "#   max_lines_changed: 50",
    ])


def documented(spec: dict[str, Any]) -> str:
    """`spec` as commented YAML (loads back to `spec`)."""
    out: list[str] = []
    for key, value in spec.items():
        comments = _comments(key, spec)
        if comments:
            out.append(comments)
        dumped = yaml.safe_dump({key: value}, sort_keys=False, allow_unicode=True, width=100)
        out.append(dumped.rstrip("\n"))
        out.append("")
    out.append(_agent_example())
    return "\n".join(out) + "\n"
