"""One scripted attempt through pytest and the Docker sandbox, for the adversarial attempt tests.

`run_agent` runs the `scripted` agent (a list of tool calls) on fix-mean-off-by-one of a copy of
the bundled taskpacks, with task `environment` overrides and extra pytest options, and returns its
record and task directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]


def run_agent(tmp_path: Path, calls: list[dict], *options: str,
              **environment: object) -> tuple[dict, Path]:
    """One scripted attempt on fix-mean-off-by-one through pytest and Docker (a copy of the
    taskpacks with `environment` overrides); its record and its task directory."""
    packs = tmp_path / "taskpacks"
    shutil.copytree(ROOT / "taskpacks", packs)
    task_file = packs / "custom-dev" / "fix-mean-off-by-one" / "task.yaml"
    spec = yaml.safe_load(task_file.read_text())
    spec["environment"].update(environment)
    task_file.write_text(yaml.safe_dump(spec))
    script, variant = tmp_path / "script.yaml", tmp_path / "agent.yaml"
    script.write_text(yaml.safe_dump(calls))
    variant.write_text(yaml.safe_dump({"name": "scripted", "agent": "scripted",
                                       "params": {"script": str(script)}}))
    out = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
         "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={packs}",
         f"--agentbench-out={out}", "-k", "fix-mean-off-by-one",
         f"--agentbench-variant={variant}", *options],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    (run_dir,) = run_dirs(out)
    (line,) = (run_dir / "attempts.jsonl").read_text().splitlines()
    assert "INTERNALERROR" not in proc.stdout + proc.stderr, proc.stdout[-3000:]
    return json.loads(line), run_dir / "tasks" / "fix-mean-off-by-one"
