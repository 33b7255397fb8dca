"""Issue 8 item 5 through the whole pipeline: an agent that replaces .git with a `gitdir:` file
pointing at a repository it planted (with a core.fsmonitor) and leaves a FIFO behind, in a run
with --agentbench-keep-workspace. The record must exist and `git status` in the kept copy must
not run the agent's command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.adversarial, pytest.mark.docker, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
PLANT = (
    "git init -q --bare .evil && "
    "git --git-dir=.evil config core.fsmonitor 'touch /tmp/pwned-$PWNED_TAG; false' && "
    "rm -rf .git && printf 'gitdir: .evil\\n' > .git && mkfifo minilib/pipe && "
    "sed -i 's/(len(values) - 1)/len(values)/' minilib/mathx.py"
)


def test_kept_workspace_cannot_run_the_agents_git_config(tmp_path: Path) -> None:
    script, variant = tmp_path / "script.yaml", tmp_path / "planter.yaml"
    script.write_text(yaml.safe_dump([{"tool": "run", "arguments": {"command": PLANT}}]))
    variant.write_text(yaml.safe_dump({"name": "planter", "agent": "scripted",
                                       "params": {"script": str(script)}}))
    out = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
         "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
         f"--agentbench-out={out}", "-k", "fix-mean-off-by-one",
         f"--agentbench-variant={variant}", "--agentbench-keep-workspace"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    (run_dir,) = list(out.iterdir())
    (line,) = (run_dir / "attempts.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["result"]["failure_reason"] != "SANDBOX_ERROR", proc.stdout[-3000:]
    task_dir = run_dir / "tasks" / "fix-mean-off-by-one"
    kept = task_dir / "repo"
    assert (kept / "minilib" / "mathx.py").is_file()
    assert not (kept / ".git").exists() and not (kept / ".git").is_symlink()
    assert not (kept / "minilib" / "pipe").exists()
    environment = json.loads((task_dir / "meta" / "environment.json").read_text())
    skipped = {entry["path"] for entry in environment["kept_workspace"]["skipped"]}
    assert ".git" in skipped and "minilib/pipe" in skipped
    tag = os.urandom(4).hex()
    subprocess.run(["git", "status"], cwd=kept, capture_output=True,
                   env={**os.environ, "PWNED_TAG": tag}, timeout=60)
    assert not Path(f"/tmp/pwned-{tag}").exists()


def test_a_2000_level_workspace_does_not_lose_the_record(tmp_path: Path) -> None:
    """shutil.rmtree recursed once per level: RecursionError in teardown, no record."""
    script, variant = tmp_path / "script.yaml", tmp_path / "nester.yaml"
    nest = ("python -c \"import os\nfor _ in range(2000):\n    os.mkdir('d'); os.chdir('d')\"")
    script.write_text(yaml.safe_dump([{"tool": "run", "arguments": {"command": nest}}]))
    variant.write_text(yaml.safe_dump({"name": "nester", "agent": "scripted",
                                       "params": {"script": str(script)}}))
    out = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
         "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
         f"--agentbench-out={out}", "-k", "fix-mean-off-by-one",
         f"--agentbench-variant={variant}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    (run_dir,) = list(out.iterdir())
    (line,) = (run_dir / "attempts.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["result"]["failure_reason"] != "SANDBOX_ERROR", proc.stdout[-3000:]
    assert "INTERNALERROR" not in proc.stdout + proc.stderr
