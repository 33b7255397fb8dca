"""Small synthetic git histories for the harvest's tests, made with real git, and the harvest
and the plugin run on them as a user runs them (`agentbench harvest`, `pytest --agentbench-...`)
in subprocesses with their own HOME.

`History` writes one first-parent commit per call, with fixed dates (so two repositories made
the same way have the same commit ids); `merge_branch` makes a `--no-ff` merge of a side branch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.run_dirs import run_dirs

AGENTBENCH = Path(sys.executable).parent / "agentbench"
Files = dict[str, str | bytes | None]  # path -> content; None deletes the file


@dataclass
class History:
    repo: Path
    commits: list[str] = field(default_factory=list)  # first-parent line, oldest first
    clock: int = 1_600_000_000

    def __post_init__(self) -> None:
        self.repo.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str, author: str = "Dev <dev@example.invalid>") -> str:
        name, email = author[:-1].split(" <")
        self.clock += 60
        date = f"@{self.clock} +0000"
        env = {**os.environ, "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
               "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email,
               "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date,
               "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        done = subprocess.run(["git", *args], cwd=self.repo, env=env, check=True,
                              capture_output=True, text=True)
        return done.stdout.strip()

    def write(self, files: Files) -> None:
        for path, content in files.items():
            target = self.repo / path
            if content is None:
                self.git("rm", "-q", "--", path)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
            self.git("add", "--", path)

    def commit(self, message: str, files: Files, author: str = "Dev <dev@example.invalid>") -> str:
        self.write(files)
        self.git("commit", "-q", "--allow-empty", "-m", message, author=author)
        sha = self.git("rev-parse", "HEAD")
        self.commits.append(sha)
        return sha

    def rename(self, message: str, old: str, new: str, files: Files) -> str:
        self.git("mv", old, new)
        return self.commit(message, files)

    def merge_branch(self, message: str, steps: list[tuple[str, Files]]) -> str:
        """A side branch with `steps` (one commit each), merged into main with --no-ff."""
        self.git("checkout", "-q", "-b", "side")
        for step_message, files in steps:
            self.write(files)
            self.git("commit", "-q", "-m", step_message)
        self.git("checkout", "-q", "main")
        self.git("merge", "-q", "--no-ff", "-m", message, "side")
        self.git("branch", "-q", "-D", "side")
        sha = self.git("rev-parse", "HEAD")
        self.commits.append(sha)
        return sha


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a harvest or plugin run under test: its own HOME, this interpreter's
    bin first on PATH (the local sandbox runs `python -m pytest` from PATH), no pytest options."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.update(HOME=str(home), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
               AGENTBENCH_HARVEST_SANDBOX="local")
    env.update(extra)
    return env


def harvest_command(source: Path, suite: str, out: Path, *extra: str) -> list[str]:
    return [str(AGENTBENCH), "harvest", str(source), "--suite", suite, "--out", str(out), *extra]


def harvest(source: Path, suite: str, out: Path, home: Path, *extra: str,
            timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(harvest_command(source, suite, out, *extra), env=clean_env(home, **env),
                          capture_output=True, text=True, timeout=timeout, check=False)


def report_of(out: Path, suite: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / suite / "harvest_report.json").read_text())
    return data


def reasons_by_sha(report: dict[str, Any]) -> dict[str, str]:
    return {c["sha"]: c["reason"] for c in report["commits"]}


def plugin_records(taskpacks: Path, suite: str, variant: str, sandbox: str, base: Path,
                   *extra: str) -> tuple[dict[str, dict[str, Any]], str]:
    """Every harvested task of `suite` run through the plugin under `variant`: (records by task
    id, the run's output for messages)."""
    out = base / f"runs-{variant}-{sandbox}"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--agentbench-suite", suite,
         f"--agentbench-taskpacks={taskpacks}", f"--agentbench-out={out}",
         f"--agentbench-sandbox={sandbox}", f"--agentbench-variant={variant}", *extra],
        cwd=base, env=clean_env(base / "home"), capture_output=True, text=True, timeout=600,
    )
    text = proc.stdout[-4000:] + proc.stderr[-2000:]
    dirs = run_dirs(out)
    assert len(dirs) == 1, text
    lines = (dirs[0] / "attempts.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    return {r["task_id"]: r for r in records}, text
