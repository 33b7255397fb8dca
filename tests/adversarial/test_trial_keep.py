"""Issue 8 items 4 and 5 through the whole pipeline: an agent that replaces .git with a `gitdir:`
file pointing at a repository it planted (with a core.fsmonitor) and leaves a FIFO behind, in a
run with --agentbench-keep-workspace, and an agent that nests 2000 directories. The record must
exist and `git status` in the kept copy must not run the agent's command."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.support.scripted_runs import run_agent

PLANT = (
    "git init -q --bare .evil && "
    "git --git-dir=.evil config core.fsmonitor 'touch /tmp/pwned-$PWNED_TAG; false' && "
    "rm -rf .git && printf 'gitdir: .evil\\n' > .git && mkfifo minilib/pipe && "
    "sed -i 's/(len(values) - 1)/len(values)/' minilib/mathx.py"
)


def test_kept_workspace_cannot_run_the_agents_git_config(tmp_path: Path) -> None:
    record, task_dir = run_agent(
        tmp_path, [{"tool": "run", "arguments": {"command": PLANT}}],
        "--agentbench-keep-workspace")
    assert record["result"]["failure_reason"] != "SANDBOX_ERROR", record["result"]
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
    nest = "python -c \"import os\nfor _ in range(2000):\n    os.mkdir('d'); os.chdir('d')\""
    record, _ = run_agent(tmp_path, [{"tool": "run", "arguments": {"command": nest}}])
    assert record["result"]["failure_reason"] != "SANDBOX_ERROR", record["result"]
