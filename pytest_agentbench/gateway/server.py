"""`ModelGateway`: the host-side model endpoint of one attempt.

A loopback HTTP server (the stdlib's ThreadingHTTPServer) with a bearer token of its own, made
per attempt. It answers model calls only, of its attempt only:

    POST /v1/chat/completions, /chat/completions   OpenAI Chat Completions (stream or not)
    POST /v1/responses, /responses                  OpenAI Responses (stream or not)
    POST /v1/messages                               Anthropic Messages (stream or not)

A request without this attempt's token (`Authorization: Bearer T` or `x-api-key: T`) gets 403
on any path; with it, any other path 404 and another method 405. A call is checked against
the attempt's budgets before it is forwarded through the model client (which holds the key and
does the retries); a refused call is answered 403 with one line saying why, an upstream failure
502, and `stop` then says how the attempt ends (llm_v0's reasons: AGENT_GAVE_UP BUDGET_*,
TIMEOUT TASK_BUDGET, LLM_ERROR ...). The policy for model names and sampling values is
`gateway.meter`'s. Streaming answers are server-sent events rebuilt from the complete reply.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
import socketserver
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from pytest_agentbench.gateway import anthropic, openai_chat, openai_responses
from pytest_agentbench.gateway.cassette import CassettePlayer
from pytest_agentbench.gateway.meter import (
    Events,
    GatewayStop,
    Meter,
    Refused,
)
from pytest_agentbench.gateway.request import BadRequest
from pytest_agentbench.llm import (
    ChatParams,
    ModelClient,
    OpenAICompatClient,
    ResolvedModelConfig,
)
from pytest_agentbench.llm.spend import Budgets
from pytest_agentbench.schemas.events import LLMRetry
from pytest_agentbench.schemas.records import ModelInfo, Usage
from pytest_agentbench.text.redaction import Redactor

MAX_BODY_BYTES = 32 << 20
IDLE_TIMEOUT_SEC = 60.0  # a connection that sends nothing for this long is closed
ROUTES: dict[str, ModuleType] = {
    "/v1/chat/completions": openai_chat,
    "/chat/completions": openai_chat,
    "/v1/responses": openai_responses,
    "/responses": openai_responses,
    "/v1/messages": anthropic,
}
CALL_ID_PREFIX = {anthropic.PROTOCOL: "msg_gw", openai_responses.PROTOCOL: "resp_gw"}


class ModelGateway:
    """One attempt's gateway. `with ModelGateway(...) as gw:` starts it on 127.0.0.1 (an
    ephemeral port); give the agent `gw.base_url` (OpenAI: `gw.openai_base_url`) and
    `gw.token`, never the key. After the agent: `usage`, `model`, `stop`,
    `requested_models`."""

    def __init__(self, client: ModelClient | None, params: ChatParams, model: ModelInfo,
                 limits: Budgets, deadline: float, events: Events, *,
                 redactors: Sequence[Redactor] = (), artifacts_dir: Path | None = None,
                 host: str = "127.0.0.1", replay: CassettePlayer | None = None) -> None:
        self.token = secrets.token_urlsafe(32)
        self.meter = Meter(client, params, model, limits, deadline, events, redactors,
                           artifacts_dir, replay)
        self._host = host
        self._httpd: socketserver.BaseServer | None = None
        self._thread: threading.Thread | None = None
        self._calls = 0
        self._owned_client: OpenAICompatClient | None = None  # made by for_model: closed here
        self._unix: Path | None = None

    @classmethod
    def for_model(cls, resolved: ResolvedModelConfig, limits: Budgets, deadline: float,
                  events: Events, *, redactor: Redactor | None = None,
                  artifacts_dir: Path | None = None, transport: Any = None,
                  prompt_version: str | None = None,
                  replay: Path | None = None) -> ModelGateway:
        """A gateway to the evaluated model of a resolved model configuration (the client made
        with its key and retries; each retry an `llm_retry` event, as llm_v0's). With `replay`
        (a cassette file) no client is made and no key read: the cassette answers
        (CassetteError, one line, when it cannot be read). Either way the calls are recorded
        to `artifacts_dir/cassette.jsonl`."""
        redactors = [Redactor(env_names=resolved.key_env_names()),
                     *([redactor] if redactor is not None else [])]

        def redact(obj: Any) -> Any:
            for one in redactors:
                obj = one.redact_obj(obj)
            return obj

        def on_event(kind: str, payload: dict[str, Any]) -> None:
            if kind == "llm_retry":
                events.emit(LLMRetry(attempt=payload.get("attempt", 0),
                                     status=payload.get("status"),
                                     wait_sec=float(payload.get("wait_sec") or 0.0),
                                     error=redact(str(payload.get("error", "")))), actor="llm")

        player = CassettePlayer(replay) if replay is not None else None
        client = (resolved.make_client(on_event=on_event, transport=transport)
                  if player is None else None)
        model = ModelInfo(**redact(resolved.model_info()), prompt_version=prompt_version)
        gateway = cls(client, resolved.chat_params(), model, limits, deadline, events,
                      redactors=redactors, artifacts_dir=artifacts_dir, replay=player)
        gateway._owned_client = client
        return gateway

    # -- what the agent and the record get ---------------------------------------------------
    @property
    def base_url(self) -> str:
        assert isinstance(self._httpd, ThreadingHTTPServer), "gateway not started on TCP"
        return f"http://{self._host}:{self._httpd.server_address[1]}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def usage(self) -> Usage:
        return self.meter.usage

    @property
    def model(self) -> ModelInfo:
        return self.meter.model

    @property
    def stop(self) -> GatewayStop | None:
        return self.meter.stop

    @property
    def requested_models(self) -> list[str]:
        return list(self.meter.requested_models)

    @property
    def socket_path(self) -> Path | None:
        """The Unix socket it listens on instead of loopback TCP (`start(unix_socket=...)`)."""
        return self._unix

    # -- life --------------------------------------------------------------------------------
    def start(self, unix_socket: Path | None = None) -> ModelGateway:
        """Listen on 127.0.0.1 (an ephemeral port), or on `unix_socket` (made mode 0666: a
        sandbox user reaches it through a bind mount; the token is the lock)."""
        httpd: socketserver.BaseServer
        if unix_socket is not None:  # no TCP option on a Unix socket
            handler = type("GatewayHandler", (_Handler,),
                           {"gateway": self, "disable_nagle_algorithm": False})
            httpd = _UnixHTTPServer(str(unix_socket), handler)
            os.chmod(unix_socket, 0o666)
            self._unix = unix_socket
        else:
            handler = type("GatewayHandler", (_Handler,), {"gateway": self})
            httpd = ThreadingHTTPServer((self._host, 0), handler)
            httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="model-gateway",
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._unix is not None:
            with contextlib.suppress(OSError):
                self._unix.unlink()
        self.meter.close()
        if self._owned_client is not None:
            self._owned_client.close()

    def __enter__(self) -> ModelGateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def authorized(self, headers: Any) -> bool:
        given = headers.get("x-api-key") or ""
        auth = headers.get("authorization") or ""
        if auth[:7].lower() == "bearer ":
            given = auth[7:].strip()
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    def next_call_id(self, protocol: str) -> str:
        self._calls += 1
        prefix = CALL_ID_PREFIX.get(protocol, "chatcmpl-gw")
        return f"{prefix}{self._calls}{secrets.token_hex(6)}"


class _UnixHTTPServer(socketserver.ThreadingUnixStreamServer):
    """The HTTP server on a Unix socket (a sandbox's relay connects to it)."""

    daemon_threads = True

    def server_bind(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.server_address)  # type: ignore[arg-type]
        super().server_bind()


class _Handler(BaseHTTPRequestHandler):
    gateway: ModelGateway
    protocol_version = "HTTP/1.1"  # keep-alive: agents' HTTP clients reuse connections
    timeout = IDLE_TIMEOUT_SEC
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK wait
    server_version = "agentbench-gateway"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # the events record the calls
        pass

    def address_string(self) -> str:  # a Unix socket's peer has no address
        return str(self.client_address[0]) if self.client_address else "sandbox"

    def do_POST(self) -> None:
        self._serve("POST")

    def do_GET(self) -> None:
        self._serve("GET")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def _serve(self, method: str) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        route = ROUTES.get(path)
        shape = route or (anthropic if path.startswith("/v1/messages") else openai_chat)
        body = self._read_body()
        if not self.gateway.authorized(self.headers):
            return self._error(shape, 403, "agentbench gateway: not this attempt's token",
                               "invalid_token")
        if route is None:
            return self._error(shape, 404, f"agentbench gateway: no model call at {path!r}",
                               "not_found")
        if method != "POST":
            return self._error(shape, 405, f"agentbench gateway: {method} {path}: only POST",
                               "method_not_allowed", {"Allow": "POST"})
        if body is None:
            return self._error(shape, 413, f"agentbench gateway: request body over "
                               f"{MAX_BODY_BYTES} bytes or without Content-Length",
                               "body_too_large")
        try:
            request = route.parse(json.loads(body or b"null"))
        except (ValueError, RecursionError):
            return self._error(route, 400, "agentbench gateway: the body is not JSON",
                               "invalid_json")
        except BadRequest as exc:
            return self._error(route, 400, f"agentbench gateway: {exc}", "invalid_request")
        try:
            result = self.gateway.meter.call(request)
        except Refused as refused:
            return self._error(route, refused.status, str(refused), refused.code)
        model = result.model or self.gateway.model.name
        call_id = self.gateway.next_call_id(request.protocol)
        if request.stream:
            return self._stream(route.stream(result, model, call_id, request.include_usage))
        self._send(200, json.dumps(route.response(result, model, call_id)).encode())

    def _read_body(self) -> bytes | None:
        """The body (b"" when there is none), or None when it is too large or unframed; read
        whole either way, so a keep-alive connection stays in step."""
        length = self.headers.get("Content-Length")
        if length is None:
            if self.headers.get("Transfer-Encoding"):
                self.close_connection = True
                return None
            return b""
        try:
            size = int(length)
        except ValueError:
            self.close_connection = True
            return None
        if size < 0 or size > MAX_BODY_BYTES:
            self.close_connection = True
            return None
        return self.rfile.read(size)

    def _error(self, route: Any, status: int, message: str, code: str,
               headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(route.error(status, message, code)).encode(), headers)

    def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _stream(self, chunks: Iterator[bytes]) -> None:
        self.close_connection = True  # the end of the events is the end of the connection
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


