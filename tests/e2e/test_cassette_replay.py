"""Issue 23 item 6: a command agent's attempt, recorded through the gateway against a real
loopback model server, replays from its cassette with no server and no key
(`--agentbench-cassette-replay RUN_DIR`) to the same final diff and the same usage; the same
program asking something else ends LLM_ERROR CASSETTE_DIVERGED at its first call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]
TASK = "fix-mean-off-by-one"
PROGRAM_DIR = ROOT / "tests" / "fixtures" / "command_agent"
KEY = "sk-test-planted-CASSETTE-0123456789abcdef"
USAGE = {"prompt_tokens": 700, "completion_tokens": 30, "total_tokens": 730, "cost": 0.001}
FIX = ("python3 - <<'PY'\nimport pathlib\np = pathlib.Path('minilib/mathx.py')\n"
       "p.write_text(p.read_text().replace('/ (len(values) - 1)', '/ len(values)'))\nPY\n")
# the program sends each command's output back: keep it free of timings so calls repeat
CHECK = "python -m pytest -q -p no:cacheprovider tests/test_mathx.py >/dev/null && echo PASS\n"


def _variant(tmp: Path, **params: Any) -> Path:
    path = tmp / f"variant-{len(params)}.yaml"
    path.write_text(json.dumps({
        "name": "stdlib-program", "agent": "command",
        "params": {"command": "python3 $AGENTBENCH_PROGRAM_DIR/agent.py",
                   "program_dir": str(PROGRAM_DIR), **params}}))
    return path


def _run(out: Path, variant: Path, *extra: str, key: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("AGENTBENCH_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY")}
    if key:
        env["AGENTBENCH_API_KEY"] = KEY
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
           "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
           f"--agentbench-out={out}", "-k", TASK, f"--agentbench-variant={variant}",
           "--agentbench-model", "some/model", *extra]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def _attempt(out: Path) -> tuple[Path, dict[str, Any]]:
    (run_dir,) = run_dirs(out)
    (line,) = (run_dir / "attempts.jsonl").read_text().splitlines()
    return run_dir, json.loads(line)


def test_a_recorded_attempt_replays_with_no_model_to_the_same_diff(
        tmp_path: Path, docker_client: Any) -> None:
    script = [Reply("Let me look.\n```bash\ncat minilib/mathx.py\n```", usage=USAGE),
              Reply(f"Fix the divisor.\n```bash\n{FIX}```", usage=USAGE),
              Reply(f"```bash\n{CHECK}```", usage=USAGE), Reply("Done.", usage=USAGE)]
    with FakeOpenAIServer(script) as server:
        first = _run(tmp_path / "rec", _variant(tmp_path),
                     f"--agentbench-base-url={server.base_url}", key=True)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    rec_dir, recorded = _attempt(tmp_path / "rec")
    cassette = rec_dir / "tasks" / TASK / "agent" / "cassette.jsonl"
    assert len(cassette.read_text().splitlines()) == 4
    assert KEY not in cassette.read_text()

    # no server, no key: the cassette answers
    second = _run(tmp_path / "play", _variant(tmp_path),
                  f"--agentbench-cassette-replay={rec_dir}", key=False)
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-2000:]
    play_dir, replayed = _attempt(tmp_path / "play")
    assert replayed["result"]["passed"] is True, replayed["result"]
    final = Path("tasks") / TASK / "diffs" / "final.patch"
    assert (play_dir / final).read_text() == (rec_dir / final).read_text()
    assert "+    return sum(values) / len(values)" in (play_dir / final).read_text()
    for field in ("llm_calls", "prompt_tokens", "completion_tokens", "cost_usd"):
        assert replayed["usage"][field] == recorded["usage"][field], field
    events = [json.loads(line) for line in (play_dir / "events.jsonl").read_text().splitlines()]
    assert sum(e["type"] == "llm_request" for e in events) == 4
    assert not any(e.get("kind") in ("cassette_unused", "gateway_stop") for e in events)

    # the same program told less of the failing output asks something else at call 1
    third = _run(tmp_path / "diverge", _variant(tmp_path, failing_output_chars=10),
                 f"--agentbench-cassette-replay={rec_dir}", key=False)
    _, diverged = _attempt(tmp_path / "diverge")
    assert third.returncode == 10, third.stdout[-4000:] + third.stderr[-2000:]  # LLM_ERROR
    assert diverged["result"]["failure_reason"] == "LLM_ERROR", diverged["result"]
    assert diverged["result"]["sub_reason"] == "CASSETTE_DIVERGED", diverged["result"]
    assert "cassette diverged at call 1: messages[1].content" in json.dumps(diverged["result"])
