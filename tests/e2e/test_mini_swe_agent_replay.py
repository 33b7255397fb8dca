"""Issue 23 item 6, done-when: a cassette recorded in one run replays the mini-swe-agent attempt
with no server and no key, to the same final diff (mini-swe-agent installed from PyPI by the
bundled variant, in the Docker sandbox, through the gateway; the recording against the same
scripted loopback server as tests/e2e/test_mini_swe_agent.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e.test_mini_swe_agent import COMMANDS, scripted_bash
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]
TASK = "fix-mean-off-by-one"
KEY = "sk-test-planted-MINISWE-REPLAY-0123456789abcdef"


def _run(out: Path, *extra: str, key: bool) -> tuple[Path, dict[str, Any]]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("AGENTBENCH_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY")}
    if key:
        env["AGENTBENCH_API_KEY"] = KEY
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
         "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
         f"--agentbench-out={out}", "-k", TASK, "--agentbench-variant=mini-swe-agent",
         "--agentbench-model=some/model", *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    (run_dir,) = run_dirs(out)
    (line,) = (run_dir / "attempts.jsonl").read_text().splitlines()
    return run_dir, json.loads(line)


def test_a_mini_swe_agent_cassette_replays_to_the_same_diff(tmp_path: Path,
                                                             docker_client: Any) -> None:
    with FakeOpenAIServer([], default=scripted_bash) as server:
        rec_dir, recorded = _run(tmp_path / "rec", f"--agentbench-base-url={server.base_url}",
                                 key=True)
    assert recorded["result"]["passed"] is True, recorded["result"]
    play_dir, replayed = _run(tmp_path / "play", f"--agentbench-cassette-replay={rec_dir}",
                              key=False)
    assert replayed["result"]["passed"] is True, replayed["result"]
    assert replayed["usage"]["llm_calls"] == recorded["usage"]["llm_calls"] == len(COMMANDS)
    final = Path("tasks") / TASK / "diffs" / "final.patch"
    assert (play_dir / final).read_text() == (rec_dir / final).read_text()
    events = [json.loads(line) for line in (play_dir / "events.jsonl").read_text().splitlines()]
    assert not any(e.get("kind") in ("cassette_unused", "gateway_stop") for e in events)
