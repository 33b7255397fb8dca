"""Issue 23 item 2 on a remote engine: a command agent on the tests' second engine (a dockerd of
its own that cannot see this host's files, reached as a Docker context over TLS; transfer
archive), where nothing is bind-mounted. The program (the stdlib test program of
tests/fixtures/command_agent, in a program directory shipped as a root-owned read-only copy)
reaches the model at 127.0.0.1:8089 through the relay the harness holds open over a Docker exec
(gateway/tunnel_relay.py, gateway/tunnel.py), against a scripted loopback server.

Before it works, a probe in the same sandbox, as the agent, tries what an agent could: write to
its program directory, kill the relay, read the relay's pipes, ask the gateway for something
other than a model call or with another token, and push frame-shaped bytes (an OPEN naming the
engine's Docker socket, an oversized DATA header) through the loopback listener. Checked: each
is refused, none reaches the upstream, the transport stays up (the task is then solved), the
calls are events and `usage`, the planted key is nowhere, nothing is left on the engine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_command_agent import FIX, USAGE
from tests.e2e.test_mini_swe_agent import COMMANDS, scripted_bash
from tests.fakes.openai_server import FakeOpenAIServer, Reply, Step
from tests.support.host_state import docker
from tests.support.run_dirs import run_dirs

ROOT = Path(__file__).resolve().parents[2]
TASK = "fix-mean-off-by-one"
PLANTED_KEY = "sk-test-planted-REMOTECMD-0123456789abcdef"
pytestmark = pytest.mark.xdist_group("second_engine")

PROBE = r'''
import json, os, socket, struct, urllib.error, urllib.request
base, token = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
program = os.environ["AGENTBENCH_PROGRAM_DIR"]
out = {"program_owner": os.stat(os.path.join(program, "agent.py")).st_uid}
try:
    open(os.path.join(program, "planted.txt"), "w").close()
    out["program_write"] = "allowed"
except OSError as exc:
    out["program_write"] = type(exc).__name__
relays = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            if b"tunnel_relay" in fh.read():
                relays.append(int(pid))
    except OSError:
        pass
out["relays"] = len(relays)
for pid in relays:
    try:
        os.kill(pid, 9)
        out["relay_kill"] = "allowed"
    except OSError as exc:
        out["relay_kill"] = type(exc).__name__
    try:
        open(f"/proc/{pid}/fd/1", "wb").close()
        out["relay_stdout"] = "opened"
    except OSError as exc:
        out["relay_stdout"] = type(exc).__name__

def ask(path, key, method="POST"):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode()
    req = urllib.request.Request(base.rsplit("/v1", 1)[0] + path, method=method,
                                 data=body if method == "POST" else None,
                                 headers={"Authorization": "Bearer " + key,
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code

out["models_path"] = ask("/v1/models", token, "GET")
out["other_path"] = ask("/v1/embeddings", token)
out["wrong_token"] = ask("/v1/chat/completions", "sk-not-this-attempt")
out["no_token"] = ask("/v1/chat/completions", "")
frames = (struct.pack(">BII", 2, 1, 26) + b"unix:/var/run/docker.sock\n"
          + struct.pack(">BII", 3, 9, 1 << 30) + b"\r\n\r\n")
with socket.create_connection(("127.0.0.1", 8089), timeout=30) as conn:
    conn.sendall(frames)
    conn.shutdown(socket.SHUT_WR)
    answer = b""
    while chunk := conn.recv(65536):
        answer += chunk
out["frame_answer"] = answer[-400:].decode("ascii", "replace")
print("PROBE", json.dumps(out, sort_keys=True), flush=True)
'''


def _program(tmp: Path) -> Path:
    program = tmp / "program"
    program.mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / "command_agent" / "agent.py", program)
    (program / "probe.py").write_text(PROBE)
    return program


def _run(tmp: Path, engine: Any, variant: str, server: FakeOpenAIServer,
         *extra: str) -> tuple[subprocess.CompletedProcess[str], Path, str]:
    """One attempt of TASK under `variant` on the second engine; the run's output, its
    directory and the tail of every log of the attempt (for an assertion's message)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "COV_", "DOCKER_"))}
    env.update(DOCKER_CONFIG=str(engine.docker_config), DOCKER_CONTEXT="default",
               AGENTBENCH_API_KEY=PLANTED_KEY)
    out = tmp / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(ROOT),
         "--agentbench-suite", "custom-dev", f"--agentbench-taskpacks={ROOT / 'taskpacks'}",
         f"--agentbench-out={out}", "-k", TASK, f"--agentbench-variant={variant}",
         f"--agentbench-engine={engine.context}", "--agentbench-env-cache=none",
         "--agentbench-base-url", server.base_url, "--agentbench-model", "some/model", *extra],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    (run_dir,) = run_dirs(out)
    logs = "".join(p.read_text("utf-8", "replace")[-3000:]
                   for p in sorted((run_dir / "tasks" / TASK / "logs").glob("*")) if p.is_file())
    return proc, run_dir, logs


def _left(engine: Any, run_dir: Path) -> list[str]:
    second = {"DOCKER_CONFIG": str(engine.docker_config), "DOCKER_CONTEXT": engine.context}
    label = f"label=agentbench.run_id={run_dir.name}"
    return (docker("ps", "-aq", "--filter", label, env=second).split()
            + docker("volume", "ls", "-q", "--filter", label, env=second).split())


def _script() -> list[Step]:
    return [Reply("Let me look.\n```bash\ncat minilib/mathx.py\n```", usage=USAGE),
            Reply(f"Fix the divisor.\n```bash\n{FIX}```", usage=USAGE),
            Reply("```bash\npython -m pytest -q -p no:cacheprovider tests/test_mathx.py\n```",
                  usage=USAGE),
            Reply("The tests pass; done.", usage=USAGE)]


def test_a_command_agent_solves_the_task_on_a_remote_engine_through_the_exec_relay(
        tmp_path: Path, second_engine: Any) -> None:
    variant = tmp_path / "variant.yaml"
    variant.write_text(json.dumps({
        "name": "stdlib-program-remote", "agent": "command",
        "params": {"command": "python3 $AGENTBENCH_PROGRAM_DIR/probe.py && "
                              "python3 $AGENTBENCH_PROGRAM_DIR/agent.py",
                   "program_dir": str(_program(tmp_path))}}))
    with FakeOpenAIServer(_script()) as server:
        proc, run_dir, logs = _run(tmp_path, second_engine, str(variant), server)
        requests = list(server.requests)
    task_dir = run_dir / "tasks" / TASK
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:] + logs
    (line,) = (run_dir / "attempts.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["engine"] == second_engine.context
    assert record["result"]["passed"] is True, record["result"]
    environment = json.loads((task_dir / "meta" / "environment.json").read_text())
    agent_box = [s for s in environment["sandboxes"] if s["phase"] == "agent"][0]["facts"]
    assert agent_box["transfer"] == "archive"
    mounts = {m["target"]: m for m in agent_box["create_args"]["mounts"]}
    assert mounts["/opt/agentbench/program"]["type"] == "volume"
    assert mounts["/opt/agentbench/program"]["read_only"] is True
    transport = environment["gateway_transport"]
    assert transport["kind"] == "exec" and transport["problem"] is None, transport
    assert transport["streams"] >= 8  # the probe's 5 and the agent's 4 calls (urllib: 1 each)
    # what the agent could do from inside
    stdout = (task_dir / "logs" / "agent_program_stdout.txt").read_text()
    probe = json.loads(stdout.split("PROBE ", 1)[1].splitlines()[0])
    assert (probe["program_owner"], probe["relays"]) == (0, 1), probe
    assert probe["program_write"] in ("PermissionError", "OSError"), probe  # EACCES or EROFS
    assert (probe["relay_kill"], probe["relay_stdout"]) == ("PermissionError",) * 2, probe
    assert (probe["models_path"], probe["other_path"]) == (404, 404), probe
    assert (probe["wrong_token"], probe["no_token"]) == (403, 403), probe
    # frame-shaped bytes are the payload of a stream: the gateway reads them as HTTP
    assert "400 - Bad request" in probe["frame_answer"], probe
    # only the agent's four model calls reached the upstream, with the key, from the host
    assert len(requests) == 4
    assert all(r.headers.get("authorization") == f"Bearer {PLANTED_KEY}" for r in requests)
    assert record["usage"]["llm_calls"] == 4
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    kinds = [e["type"] for e in events if e.get("task_id") == TASK]
    assert kinds.count("llm_request") == 4 and kinds.count("llm_response") == 4, kinds
    assert "ENV " in stdout and "PROC " in stdout and "DONE" in stdout, stdout[:3000]
    leaks = [p for p in run_dir.rglob("*")
             if p.is_file() and PLANTED_KEY in p.read_text("utf-8", "replace")]
    assert leaks == []
    diff = (task_dir / "diffs" / "final.patch").read_text()
    assert "+    return sum(values) / len(values)" in diff
    assert _left(second_engine, run_dir) == []


def test_mini_swe_agent_solves_the_task_on_a_remote_engine(tmp_path: Path,
                                                           second_engine: Any) -> None:
    """The bundled mini-swe-agent (installed once per image) against the scripted server,
    through the exec relay, twice: its ~600 MB install is shipped to the engine by the first
    attempt and kept there for the second (sandbox/docker/kept_copies.py)."""
    with FakeOpenAIServer([], default=scripted_bash) as server:
        proc, run_dir, logs = _run(tmp_path, second_engine, "mini-swe-agent", server,
                                   "--agentbench-attempts=2")
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:] + logs
    records = [json.loads(x) for x in (run_dir / "attempts.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for record in records:
        assert record["result"]["passed"] is True, (record["result"], logs)
        assert record["usage"]["llm_calls"] == len(COMMANDS)
    print("sandbox_start per attempt (s):", [r["timings"]["sandbox_start"] for r in records])
    assert len(requests) == 2 * len(COMMANDS)
    assert all(r.headers.get("authorization") == f"Bearer {PLANTED_KEY}" for r in requests)
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["type"] for e in events].count("llm_response") == 2 * len(COMMANDS)
    for environment in run_dir.glob("tasks/**/meta/environment.json"):
        facts = json.loads(environment.read_text())
        assert facts["gateway_transport"]["problem"] is None
        agent_box = [s for s in facts["sandboxes"] if s["phase"] == "agent"][0]["facts"]
        assert {"target": "/opt/agentbench/program", "type": "volume", "read_only": True,
                "source": "<AGENTBENCH_PROGRAM_DIR>"} in agent_box["create_args"]["mounts"]
    leaks = [p for p in run_dir.rglob("*")
             if p.is_file() and PLANTED_KEY in p.read_text("utf-8", "replace")]
    assert leaks == []
    assert _left(second_engine, run_dir) == []  # the kept copy is the engine's, not the run's
