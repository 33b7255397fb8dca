#!/usr/bin/env python3
"""The model gateway's added latency per model call (issue 23), measured in one run against
the same loopback OpenAI-compatible server (tests/fakes/openai_server.py, scripted replies):

    direct     httpx -> fake server
    gateway    httpx -> gateway (127.0.0.1 TCP) -> model client -> fake server
    unix       httpx -> gateway (Unix socket, as a sandbox's relay reaches it) -> fake server
    responses  as `gateway`, speaking the Responses API (translated to chat and back)
    replay     httpx -> gateway answering from a cassette (no server)

Each client keeps its connection alive, as agents' SDKs do; every figure is the median of N
calls after 10 warm-up calls, the modes taking turns call by call. Prints the medians, the
added milliseconds and the ratio to direct.

    uv run python scripts/bench_gateway.py [--calls 200]
    uv run python scripts/bench_gateway.py --smoke   # 20 calls per mode
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agentbench.agents.llm_config import Budget  # noqa: E402
from pytest_agentbench.core.event_sink import EventSink  # noqa: E402
from pytest_agentbench.gateway import ModelGateway  # noqa: E402
from pytest_agentbench.llm import resolve_model_config  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer, Reply  # noqa: E402

WARMUP = 10
MESSAGES = [{"role": "system", "content": "You fix bugs."},
            {"role": "user", "content": "Task: fix minilib/mathx.py " + "x" * 2000}]
CHAT = {"model": "m", "messages": MESSAGES}
RESPONSES = {"model": "m", "instructions": "You fix bugs.", "input": MESSAGES[1]["content"]}


def timed(n: int, calls: dict[str, Callable[[], httpx.Response]]) -> dict[str, list[float]]:
    """Round robin: call i of every mode, then call i + 1, so that the machine's load at any
    moment weighs on every mode alike."""
    out: dict[str, list[float]] = {name: [] for name in calls}
    for i in range(WARMUP + n):
        for name, call in calls.items():
            started = time.perf_counter()
            response = call()
            elapsed = time.perf_counter() - started
            if response.status_code != 200:
                raise SystemExit(f"{name}: {response.status_code} {response.text[:200]}")
            if i >= WARMUP:
                out[name].append(elapsed * 1000)
    return out


def gateway(base_url: str | None, tmp: Path, name: str, replay: Path | None = None
            ) -> ModelGateway:
    resolved = resolve_model_config(variant={
        "preset": "local", "name": "eval/model", "base_url": base_url or "http://127.0.0.1:9/v1",
        "max_retries": 0})
    events = EventSink(tmp / f"{name}.events.jsonl", "bench", "task", name)
    return ModelGateway.for_model(resolved, Budget.from_dict({}), time.monotonic() + 3600,
                                  events, artifacts_dir=tmp / name, replay=replay)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="20 calls per mode")
    args = parser.parse_args()
    n = 20 if args.smoke else args.calls
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        server = stack.enter_context(FakeOpenAIServer([], default=Reply(content="ok")))
        # a cassette of WARMUP + n answers to CHAT, for the replaying gateway
        recorder = stack.enter_context(gateway(server.base_url, tmp, "record"))
        http = stack.enter_context(httpx.Client(timeout=30, trust_env=False))
        for _ in range(WARMUP + n):
            http.post(f"{recorder.base_url}/v1/chat/completions", json=CHAT,
                      headers={"authorization": f"Bearer {recorder.token}"})
        tcp = stack.enter_context(gateway(server.base_url, tmp, "tcp"))
        sock = tmp / "gw.sock"
        unix = stack.enter_context(gateway(server.base_url, tmp, "unix").start(sock))
        uds = stack.enter_context(httpx.Client(
            timeout=30, trust_env=False, transport=httpx.HTTPTransport(uds=str(sock))))
        replay = stack.enter_context(gateway(None, tmp, "replay",
                                             replay=tmp / "record" / "cassette.jsonl"))
        clients = {name: stack.enter_context(httpx.Client(timeout=30, trust_env=False))
                   for name in ("direct", "gateway", "responses", "replay")}

        def post(client: httpx.Client, url: str, gw: ModelGateway | None,
                 body: dict[str, Any]) -> Callable[[], httpx.Response]:
            headers = {"authorization": f"Bearer {gw.token}"} if gw is not None else {}
            return lambda: client.post(url, json=body, headers=headers)

        results = timed(n, {
            "direct": post(clients["direct"], f"{server.base_url}/chat/completions", None,
                           CHAT),
            "gateway": post(clients["gateway"], f"{tcp.base_url}/v1/chat/completions", tcp,
                            CHAT),
            "responses": post(clients["responses"], f"{tcp.base_url}/v1/responses", tcp,
                              RESPONSES),
            "unix": post(uds, "http://gateway/v1/chat/completions", unix, CHAT),
            "replay": post(clients["replay"], f"{replay.base_url}/v1/chat/completions", replay,
                           CHAT),
        })
    direct = statistics.median(results["direct"])
    print(f"model gateway latency per call, median of {n} calls each (ms), round robin, "
          "same loopback server")
    for name, times in results.items():
        median = statistics.median(times)
        extra = "" if name == "direct" else (
            f"  +{median - direct:6.2f} ms  ratio {median / direct:5.2f}")
        print(f"  {name:<10} {median:7.2f}  p90 {statistics.quantiles(times, n=10)[-1]:7.2f}"
              f"{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
