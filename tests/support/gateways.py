"""A model gateway (pytest_agentbench.gateway) in front of the loopback fake OpenAI server, for
the gateway's tests: `running_gateway(steps, budgets=...)` yields a `GatewayRig` with the
gateway, the fake upstream (its recorded requests), the attempt's events and an httpx client
that holds only the gateway's token, as an agent in a sandbox would."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_agentbench.agents.llm_config import Budget
from pytest_agentbench.core.event_sink import EventSink
from pytest_agentbench.gateway import ModelGateway
from pytest_agentbench.llm import resolve_model_config
from tests.fakes.openai_server import FakeOpenAIServer, Step

KEY = "sk-test-GATEWAYKEY0123456789abcdefXYZ"
EVALUATED = "eval/model-under-test"


@dataclass
class GatewayRig:
    gateway: ModelGateway
    upstream: FakeOpenAIServer
    events: EventSink
    http: httpx.Client
    artifacts: Path

    def post(self, path: str, body: Any, token: str | None = None,
             header: str = "authorization") -> httpx.Response:
        token = self.gateway.token if token is None else token
        value = f"Bearer {token}" if header == "authorization" else token
        return self.http.post(f"{self.gateway.base_url}{path}", json=body,
                              headers={header: value})

    def kinds(self) -> list[str]:
        return [e["type"] if e["type"] != "note" else f"note:{e['kind']}"
                for e in self.events.emitted]


@contextmanager
def running_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: Sequence[Step], *,
                    budgets: dict[str, Any] | None = None,
                    model: dict[str, Any] | None = None, task_sec: float = 120.0,
                    ) -> Iterator[GatewayRig]:
    monkeypatch.setenv("AGENTBENCH_API_KEY", KEY)  # the host's key: only the gateway reads it
    with FakeOpenAIServer(list(steps)) as upstream:
        resolved = resolve_model_config(variant={
            "preset": "openrouter", "name": EVALUATED, "base_url": upstream.base_url,
            "max_retries": 1, "backoff_base_sec": 0.01, "backoff_max_sec": 0.05,
            **(model or {})})
        events = EventSink(tmp_path / "events.jsonl", "run-1", "task-1", "attempt-1")
        artifacts = tmp_path / "agent"
        gateway = ModelGateway.for_model(
            resolved, Budget.from_dict(budgets or {}), time.monotonic() + task_sec, events,
            artifacts_dir=artifacts)
        with gateway, httpx.Client(timeout=30, trust_env=False) as http:
            yield GatewayRig(gateway, upstream, events, http, artifacts)


def sse_data(response: httpx.Response) -> list[Any]:
    """The `data:` payloads of a server-sent event stream (JSON decoded, `[DONE]` as is)."""
    out: list[Any] = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            payload = line[len("data: "):]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out
