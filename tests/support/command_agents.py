"""A bundled command agent's attempt at fix-mean-off-by-one through pytest, Docker and the
model gateway, against a scripted loopback server, with a key planted in the host environment:
what the e2e tests of mini-swe-agent, aider and the npm agents share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest, Step
from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]
TASK = "fix-mean-off-by-one"
PLANTED_KEY = "sk-test-planted-COMMANDAGENTS-0123456789abcdef"


@dataclass
class AgentRun:
    proc: subprocess.CompletedProcess[str]
    requests: list[RecordedRequest]
    run_dir: Path
    record: dict[str, Any]

    @property
    def task_dir(self) -> Path:
        return self.run_dir / "tasks" / TASK

    def program_logs(self) -> str:
        """The tail of the program's own output, for an assertion's message."""
        return "".join(p.read_text("utf-8", "replace")[-3000:]
                       for p in sorted((self.task_dir / "logs").glob("agent_program_*")))

    def events(self) -> list[dict[str, Any]]:
        lines = (self.run_dir / "events.jsonl").read_text().splitlines()
        return [e for e in map(json.loads, lines) if e.get("task_id") == TASK]

    def leaks(self) -> list[Path]:
        """Files of the run that hold the planted key (there must be none)."""
        return [p for p in self.run_dir.rglob("*")
                if p.is_file() and PLANTED_KEY in p.read_text("utf-8", "replace")]


def run_variant(variant: str, out: Path, model: Step) -> AgentRun:
    """One attempt of TASK under `variant`; `model` answers every model call."""
    env = {**os.environ, "AGENTBENCH_API_KEY": PLANTED_KEY}
    with FakeOpenAIServer([], default=model) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
             "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
             f"--agentbench-out={out}", "-k", TASK, "--agentbench-variant", variant,
             "--agentbench-base-url", server.base_url, "--agentbench-model", "some/model"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    (run_dir,) = run_dirs(out)
    (line,) = (run_dir / "attempts.jsonl").read_text().splitlines()
    return AgentRun(proc, requests, run_dir, json.loads(line))
