#!/usr/bin/env python3
"""What the remote model relay adds per model call (issue 23 item 2): a client inside a Docker
sandbox calls the same model gateway (Unix socket on this host, a scripted loopback upstream
behind it) at 127.0.0.1:8089 through

    local     the mounted socket and gateway/relay.py (an engine that sees this host's files)
    exec      gateway/tunnel_relay.py held open by a Docker exec, frames pumped by
              gateway/tunnel.py (transfer archive), on the same local engine
    remote    the same over TLS to a second dockerd (tests/support/engines.py; --second-engine)

Each sandbox's client makes N calls on a new connection each (as urllib does) and N on one
kept-alive connection (as agents' SDKs do); batches of N/5 take turns between the modes so the
machine's load weighs on each alike. Prints medians and the added milliseconds against local.

    uv run python scripts/bench_gateway_transport.py [--calls 50] [--second-engine]
    uv run python scripts/bench_gateway_transport.py --smoke   # 5 calls per mode: it runs, prints
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import docker  # noqa: E402

from pytest_agentbench.agents.llm_config import Budget  # noqa: E402
from pytest_agentbench.core.event_sink import EventSink  # noqa: E402
from pytest_agentbench.gateway import ModelGateway  # noqa: E402
from pytest_agentbench.gateway.tunnel import TunnelPump, relay_argv  # noqa: E402
from pytest_agentbench.llm import resolve_model_config  # noqa: E402
from pytest_agentbench.sandbox.docker.factory import DockerSandboxFactory  # noqa: E402
from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE  # noqa: E402
from pytest_agentbench.sandbox.port import ExtraMount, SandboxSpec  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer, Reply  # noqa: E402

GATEWAY_TARGET = "/run/agentbench/gateway"
CLIENT = r'''
import http.client, json, os, sys, time, urllib.request
n, token = int(sys.argv[1]), os.environ["TOKEN"]
body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "fix " + "x" * 2000}]})
headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
new, keep = [], []
for i in range(n + 1):
    t = time.perf_counter()
    urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:8089/v1/chat/completions",
                                                  data=body.encode(), headers=headers)).read()
    new.append((time.perf_counter() - t) * 1000)
conn = http.client.HTTPConnection("127.0.0.1", 8089, timeout=30)
for i in range(n + 1):
    t = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, headers)
    answer = conn.getresponse()
    answer.read()
    assert answer.status == 200, answer.status
    keep.append((time.perf_counter() - t) * 1000)
print(json.dumps({"new": new[1:], "keep": keep[1:]}))
'''


def _spec(root: Path, name: str, gateway_dir: Path) -> SandboxSpec:
    workspace = root / name / "ws"
    workspace.mkdir(parents=True)
    (workspace / "client.py").write_text(CLIENT)
    return SandboxSpec(image=DEFAULT_IMAGE, workspace=workspace, env_dir=root / name / "env",
                       labels={"agentbench.run_id": "bench-gateway-transport"},
                       extra_mounts=(ExtraMount(gateway_dir, GATEWAY_TARGET,
                                                "AGENTBENCH_GATEWAY_DIR"),))


def _batch(sandbox: Any, n: int, token: str, socket_path: Path) -> dict[str, list[float]]:
    env = {"TOKEN": token}
    if sandbox.sees_host_files:
        command = (f"python3 {GATEWAY_TARGET}/relay.py 8089 {GATEWAY_TARGET}/{socket_path.name}"
                   f" -- python3 client.py {n}")
        result = sandbox.exec(command, timeout_sec=300, env=env)
    else:
        pump = TunnelPump(sandbox.attach(relay_argv(8089)), socket_path).start()
        try:
            assert pump.wait_ready(30), pump.problem
            result = sandbox.exec(f"python3 client.py {n}", timeout_sec=300, env=env)
        finally:
            pump.close()
    if result.exit_code != 0:
        raise SystemExit(f"client failed: {result.stdout[-500:]} {result.stderr[-1500:]}")
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny size (5 calls per mode, this engine only): it runs and prints")
    parser.add_argument("--second-engine", action="store_true",
                        help="also a second dockerd over TLS (needs root; ~30 s to start)")
    args = parser.parse_args()
    if args.smoke:
        args.calls, args.second_engine = 5, False
    per_batch = max(1, args.calls // 5)
    with contextlib.ExitStack() as stack:
        root = Path(tempfile.mkdtemp(prefix="ab-bgt-"))
        stack.callback(shutil.rmtree, root, True)
        gateway_dir = root / "gw"
        gateway_dir.mkdir(mode=0o755)
        shutil.copy(ROOT / "pytest_agentbench" / "gateway" / "relay.py", gateway_dir)
        server = stack.enter_context(FakeOpenAIServer([], default=Reply(content="ok")))
        resolved = resolve_model_config(variant={
            "preset": "local", "name": "eval/model", "base_url": server.base_url,
            "max_retries": 0})
        events = EventSink(root / "events.jsonl", "bench", "task", "attempt")
        gateway = ModelGateway.for_model(resolved, Budget.from_dict({}),
                                         time.monotonic() + 3600, events)
        socket_path = gateway_dir / "gateway.sock"
        gateway.start(unix_socket=socket_path)
        stack.callback(gateway.close)
        factories = {"local": DockerSandboxFactory(),
                     "exec": DockerSandboxFactory(transfer="archive")}
        if args.second_engine:
            from tests.support.engines import open_engine

            engine = open_engine(DEFAULT_IMAGE)
            stack.callback(engine.close)
            for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # they would override its CA
                os.environ.pop(name, None)
            client = docker.from_env(environment=engine.tls_env())
            factories["remote"] = DockerSandboxFactory(client, transfer="archive",
                                                       engine="second")
        sandboxes = {}
        for name, factory in factories.items():
            sandboxes[name] = factory.open(_spec(root, name, gateway_dir))
            stack.callback(sandboxes[name].close)
        results: dict[str, dict[str, list[float]]] = {
            name: {"new": [], "keep": []} for name in sandboxes}
        for _ in range(5):
            for name, sandbox in sandboxes.items():
                for kind, times in _batch(sandbox, per_batch, gateway.token,
                                          socket_path).items():
                    results[name][kind] += times
    calls = per_batch * 5
    print(f"model call through the sandbox's relay, median of {calls} calls per mode (ms)")
    for kind, label in (("new", "a new connection per call"), ("keep", "one kept-alive")):
        base = statistics.median(results["local"][kind])
        print(f"  {label}:")
        for name, by_kind in results.items():
            median = statistics.median(by_kind[kind])
            extra = "" if name == "local" else f"  +{median - base:6.2f} ms vs local"
            print(f"    {name:<7} {median:7.2f}  p90 "
                  f"{statistics.quantiles(by_kind[kind], n=10)[-1]:7.2f}{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
