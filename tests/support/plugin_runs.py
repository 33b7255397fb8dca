"""Runs of the plugin on the bundled taskpacks, for the end-to-end tests, and what they leave.

`PluginRunner` runs a real `python -m pytest` subprocess with its own working directory, HOME and
output directory, so a run never touches the developer's caches or reports; `PytestRun` is its
result and `RunDir` the run directory it wrote (records and events validated when read).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_agentbench.schemas.events import EventAdapter
from pytest_agentbench.schemas.records import AttemptRecord
from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]
TASKPACKS = ROOT / "taskpacks"
SUITE = "custom-dev"

#: The bundled custom-dev suite: tasks the oracle solves, and the two that are broken on purpose.
VALID_TASKS = (
    "fix-mean-off-by-one",
    "fix-parse-size-units",
    "fix-title-case-small-words",
    "fix-toml-nested-lookup",
    "remove-stale-override",
    "restore-slug-module",
)
INVALID_TASK, FLAKY_TASK = "baseline-already-passes", "flaky-baseline"
ALL_TASKS = tuple(sorted((*VALID_TASKS, INVALID_TASK, FLAKY_TASK)))

OUTCOME_NOUNS = ("passed", "failed", "errors", "skipped", "xfailed", "xpassed", "deselected")


# --------------------------------------------------------------------------- environment


def run_env(home: Path) -> dict[str, str]:
    """The environment of a pytest run under test: own HOME (so caches and git config are its
    own), this interpreter first on PATH (the local sandbox runs `python -m pytest` from PATH),
    no outer pytest options."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env["HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def agentbench_args(out: Path, *extra: str, sandbox: str | None = None) -> list[str]:
    args = [
        "-p",
        "no:cacheprovider",
        "--agentbench-suite",
        SUITE,
        f"--agentbench-taskpacks={TASKPACKS}",
        f"--agentbench-out={out}",
    ]
    if sandbox:
        args.append(f"--agentbench-sandbox={sandbox}")
    return [*args, *extra]


def python_m_pytest(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", *args]


# --------------------------------------------------------------------------- results


def parse_outcomes(text: str) -> dict[str, int]:
    """Nonzero outcome counts from pytest's final summary line ("6 passed, 1 error in 3.1s")."""
    nouns = pytest.RunResult.parse_summary_nouns(text.splitlines())
    return {k: v for k, v in nouns.items() if k in OUTCOME_NOUNS and v}


@dataclass
class PytestRun:
    returncode: int
    stdout: str
    stderr: str
    out: Path

    @property
    def text(self) -> str:
        return self.stdout + "\n" + self.stderr

    @property
    def outcomes(self) -> dict[str, int]:
        return parse_outcomes(self.stdout)

    def assert_outcomes(self, **expected: int) -> None:
        assert self.outcomes == expected, self.tail()

    def tail(self, chars: int = 6000) -> str:
        return f"exit {self.returncode}\n{self.stdout[-chars:]}\n{self.stderr[-2000:]}"

    @property
    def xdist_items(self) -> int:
        """Items the xdist workers were given ("2 workers [3 items]"): selected, not deselected."""
        match = re.search(r"^\d+ workers? \[(\d+) items?\]", self.stdout, re.MULTILINE)
        assert match, self.tail()
        return int(match.group(1))

    @property
    def run_dir(self) -> RunDir:
        return only_run_dir(self.out)


def run_pytest(
    args: Sequence[str], *, cwd: Path, env: dict[str, str], out: Path, timeout: float = 600
) -> PytestRun:
    proc = subprocess.run(
        python_m_pytest(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    return PytestRun(proc.returncode, proc.stdout, proc.stderr, out)


def section_bodies(stdout: str, header_words: str) -> dict[str, list[str]]:
    """Body lines of each `____ <header_words> <name> ____` section of pytest's report
    (e.g. "agentbench task" for FAILURES, "ERROR at setup of agentbench task" for ERRORS)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        stripped = line.strip("_ ")
        if line.startswith("_") and line.endswith("_") and stripped.startswith(header_words + " "):
            current = found.setdefault(stripped[len(header_words) + 1 :], [])
        elif line.startswith(("___", "===", "---")):
            current = None
        elif current is not None and line.strip() and not line.startswith("[gw"):
            current.append(line)
    return found


# --------------------------------------------------------------------------- run directories


@dataclass
class RunDir:
    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = json.loads((self.path / "run.json").read_text("utf-8"))
        return meta

    def attempt_lines(self) -> list[str]:
        path = self.path / "attempts.jsonl"
        return path.read_text("utf-8").splitlines() if path.exists() else []

    def records(self) -> list[dict[str, Any]]:
        """Every line of attempts.jsonl, each validated against the AttemptRecord schema."""
        rows = []
        for line in self.attempt_lines():
            AttemptRecord.model_validate_json(line)
            rows.append(json.loads(line))
        return rows

    def records_by_task(self) -> dict[str, dict[str, Any]]:
        rows = self.records()
        counts = Counter(r["task_id"] for r in rows)
        assert all(n == 1 for n in counts.values()), f"tasks recorded more than once: {counts}"
        return {r["task_id"]: r for r in rows}

    def events(self) -> list[dict[str, Any]]:
        """Every line of events.jsonl, each validated against the event union."""
        rows = []
        for line in (self.path / "events.jsonl").read_text("utf-8").splitlines():
            EventAdapter.validate_json(line)
            rows.append(json.loads(line))
        return rows

    def task_dir(self, task_id: str, attempt_label: str | None = None) -> Path:
        path = self.path / "tasks" / task_id
        return path / attempt_label if attempt_label else path


def only_run_dir(out: Path) -> RunDir:
    dirs = run_dirs(out)
    assert len(dirs) == 1, f"expected one run directory under {out}, found {dirs}"
    return RunDir(dirs[0])


def sequence_problems(events: list[dict[str, Any]]) -> list[str]:
    """Attempts whose events, in file order, do not carry seq 0, 1, 2, ... (strictly increasing
    and without gaps: every event an attempt emits is written)."""
    seqs: dict[str, list[int]] = defaultdict(list)
    for event in events:
        seqs[event["attempt_id"]].append(event["seq"])
    return [
        f"{attempt}: {found}" for attempt, found in seqs.items() if found != list(range(len(found)))
    ]


# --------------------------------------------------------------------------- docker


def containers_of(client: Any, run_id: str) -> list[str]:
    """Ids of every container (running or not) labelled with this run id."""
    # The low-level list: containers.list() inspects each container and races with removal.
    found = client.api.containers(all=True, filters={"label": f"agentbench.run_id={run_id}"})
    return [c["Id"][:12] for c in found]


def first_containers(out: Path, client: Any, proc: subprocess.Popen[str],
                     timeout: float) -> tuple[str | None, list[str]]:
    """The id of the run `proc` writes under `out` and its containers, once it has one up;
    ([], with the run id if known) when none appeared before it ended or `timeout` passed."""
    run_id: str | None = None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None and not seen:
        runs = list(out.glob("*/run.json"))
        if runs:
            run_id = runs[0].parent.name
            seen = containers_of(client, run_id)
        time.sleep(0.2)
    return run_id, seen


# --------------------------------------------------------------------------- the runner


@dataclass
class PluginRunner:
    """Runs `python -m pytest` with the plugin on the bundled suite, in `root` as working
    directory, `root/home` as HOME and `root/runs` as output directory (unless `out` is given).
    `sandbox` is passed as --agentbench-sandbox; None leaves the plugin's default (docker)."""

    root: Path
    sandbox: str | None = None

    @property
    def out(self) -> Path:
        return self.root / "runs"

    def env(self) -> dict[str, str]:
        return run_env(self.root / "home")

    def args(self, *extra: str, out: Path | None = None) -> list[str]:
        return agentbench_args(out or self.out, *extra, sandbox=self.sandbox)

    def run(self, *extra: str, out: Path | None = None, timeout: float = 600) -> PytestRun:
        out = out or self.out
        return run_pytest(
            self.args(*extra, out=out), cwd=self.root, env=self.env(), out=out, timeout=timeout
        )
