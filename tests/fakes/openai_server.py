"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests (stdlib only).

    with FakeOpenAIServer([Fault(429, retry_after="1"), tool_reply("finish")]) as srv:
        client = OpenAICompatClient(srv.base_url, "sk-test", ...)
        ...
        srv.requests[0].headers["authorization"]

Each POST /v1/chat/completions consumes the next scripted step: `Reply` (content and/or tool
calls, usage), `Fault` (status + optional Retry-After), `Raw` (any body: non-JSON, no choices,
bad arguments), `Slow` (sleep, then another step) or a callable `request_json -> step | dict`
(a dict is sent as the JSON body). When the script runs out, `default` answers (a call to
`finish`). Every request is recorded before it is answered, so a timed-out one still counts.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeAlias

MAX_DELAY_SEC = 5.0  # a Slow step never sleeps longer, and wakes at once on shutdown


@dataclass
class Reply:
    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {name, arguments[, id]}
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    model: str = "fake/model-1"

    def body(self, index: int) -> dict[str, Any]:
        calls = [{"id": c.get("id", f"call_{index}_{i}"), "type": "function",
                  "function": {"name": c["name"], "arguments": c["arguments"]
                               if isinstance(c.get("arguments"), str)
                               else json.dumps(c.get("arguments", {}))}}
                 for i, c in enumerate(self.tool_calls)]
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if calls:
            message["tool_calls"] = calls
        usage = self.usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        return {"id": f"gen-{index}", "object": "chat.completion", "model": self.model,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": self.finish_reason
                             or ("tool_calls" if calls else "stop")}],
                "usage": usage}


@dataclass
class Fault:
    status: int
    retry_after: str | None = None
    body: str = ""

    def text(self) -> str:
        return self.body or json.dumps({"error": {"code": self.status, "message": "injected"}})


@dataclass
class Raw:
    body: str
    status: int = 200
    content_type: str = "application/json"


@dataclass
class Slow:
    seconds: float
    then: Step


Step: TypeAlias = Reply | Fault | Raw | Slow | Callable[[Any], Any]


def tool_reply(name: str, arguments: Any = None, **kw: Any) -> Reply:
    return Reply(tool_calls=[{"name": name, "arguments": arguments or {}}], **kw)


def json_in_content(name: str, arguments: dict[str, Any], fenced: bool = False,
                    prose: str = "I will call a tool.") -> Reply:
    """A reply that writes the tool call as JSON text in `content`, with no native tool_calls."""
    call = json.dumps({"name": name, "arguments": arguments})
    return Reply(content=f"{prose}\n```json\n{call}\n```\n" if fenced else f"{prose} {call}")


def non_json(status: int = 200) -> Raw:
    return Raw("<html><body>upstream hiccup</body></html>", status, "text/html")


def no_choices() -> Raw:
    return Raw(json.dumps({"id": "gen-x", "object": "chat.completion", "model": "fake/model-1"}))


def bad_arguments(name: str, raw_arguments: str = '{"path": "a.py",') -> Reply:
    return Reply(tool_calls=[{"name": name, "arguments": raw_arguments}])


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    json: Any


class FakeOpenAIServer:
    """Context manager: starts on enter (ephemeral port), stops and joins on exit."""

    def __init__(self, steps: list[Step] | None = None, default: Step | None = None) -> None:
        self.steps: list[Step] = list(steps or [])
        self.default: Step = default or tool_reply("finish", {"summary": "done"})
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # wakes any Slow step
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _record_and_pop(self, request: RecordedRequest) -> tuple[int, Step]:
        with self._lock:
            self.requests.append(request)
            return len(self.requests), (self.steps.pop(0) if self.steps else self.default)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body: Any = json.loads(raw or b"null")
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = RecordedRequest("POST", self.path, headers, body)
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, json.dumps({"error": {"code": 404, "message": "no route"}}))
        index, step = self.fake._record_and_pop(request)
        self._answer(step, body, index)

    def _answer(self, step: Step, body: Any, index: int) -> None:
        if isinstance(step, Slow):
            if self.fake._stop.wait(min(step.seconds, MAX_DELAY_SEC)):
                return
            return self._answer(step.then, body, index)
        if isinstance(step, Reply):
            return self._send(200, json.dumps(step.body(index)))
        if isinstance(step, Fault):
            headers = {"Retry-After": step.retry_after} if step.retry_after else {}
            return self._send(step.status, step.text(), headers=headers)
        if isinstance(step, Raw):
            return self._send(step.status, step.body, step.content_type)
        produced = step(body)
        if isinstance(produced, dict):
            return self._send(200, json.dumps(produced))
        return self._answer(produced, body, index)

    def _send(self, status: int, text: str, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        data = text.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): nothing to answer
