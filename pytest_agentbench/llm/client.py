"""`OpenAICompatClient`: chat completions over httpx (sync) against any OpenAI-compatible server
(OpenRouter, OpenAI, vLLM, Ollama...). Resilience lives here: request timeouts, retries with
exponential backoff and full jitter, `Retry-After`, and a small exception tree (`errors.py`).
"""

from __future__ import annotations

import email.utils
import ipaddress
import json
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from pytest_agentbench.llm.base import ChatParams, ChatResult
from pytest_agentbench.llm.errors import (
    LLMAuthError,
    LLMBadResponse,
    LLMError,
    LLMRequestError,
    LLMRetryExhausted,
)
from pytest_agentbench.llm.wire import (
    MalformedCompletion,
    is_retryable_status,
    normalize_message,
    parse_completion,
)

EventSink = Callable[[str, dict[str, Any]], None]
MAX_BAD_RESPONSE_RETRIES = 1  # a malformed 2xx is retried once: it may be a proxy hiccup
_EXCERPT = 500


class _Retryable(Exception):
    """Internal: this attempt failed in a way worth retrying."""

    def __init__(self, error: str, status: int | None = None, retry_after: float | None = None,
                 bad_response: bool = False, body_excerpt: str = "") -> None:
        super().__init__(error)
        self.status, self.retry_after = status, retry_after
        self.bad_response, self.body_excerpt = bad_response, body_excerpt


class OpenAICompatClient:
    """POSTs `{base_url}/chat/completions`. Implements the `ModelClient` port.

    `headers` are added to every request (the preset's attribution headers, for instance);
    `extra_body` is merged into every request body (OpenRouter's `usage: {include: true}`).
    `on_event("llm_retry", {attempt, status, wait_sec, error})` fires before each backoff wait.
    `transport`, `sleep` and `rng` are seams for tests; production code leaves them alone.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        headers: Mapping[str, str] | None = None,
        timeout_sec: float = 120.0,
        max_retries: int = 3,
        backoff_base_sec: float = 1.0,
        backoff_max_sec: float = 30.0,
        on_event: EventSink | None = None,
        transport: httpx.BaseTransport | None = None,
        *,
        extra_body: Mapping[str, Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.timeout_sec = timeout_sec
        self.max_retries = max(0, max_retries)
        self.backoff_base_sec = backoff_base_sec
        self.backoff_max_sec = backoff_max_sec
        self.extra_body = dict(extra_body or {})
        self._on_event = on_event
        self._sleep = sleep
        self._rng = rng or random.Random()
        all_headers = {"Content-Type": "application/json", **dict(headers or {})}
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        # A local server (vLLM, Ollama, the test fake) must never be reached through an
        # HTTP(S)_PROXY from the environment; remote ones keep the environment's proxy and CAs.
        self._http = httpx.Client(headers=all_headers, timeout=timeout_sec, transport=transport,
                                  trust_env=not _is_loopback(self.base_url))

    def __repr__(self) -> str:  # never show the key
        return f"OpenAICompatClient(base_url={self.base_url!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> OpenAICompatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
        params: ChatParams,
    ) -> ChatResult:
        body = self.build_body(messages, tools, params)
        started = time.monotonic()
        retries = bad_responses = 0
        while True:
            attempt_started = time.monotonic()
            try:
                data = self._post(body, self._request_timeout(params))
                result = _parse(data, tools)
            except _Retryable as failure:
                bad_responses += failure.bad_response
                wait = self._wait_for(failure, retries)
                stop = self._stop_reason(failure, retries, bad_responses, wait, params)
                if stop:
                    raise _final_error(failure, retries, stop) from None
                retries += 1
                self._emit_retry(retries, failure, wait)
                self._sleep(wait)
                continue
            except LLMError as err:
                err.retries = retries
                raise
            result.latency_ms = _ms_since(attempt_started)
            result.wall_ms = _ms_since(started)
            result.retries = retries
            return result

    def build_body(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
        params: ChatParams,
    ) -> dict[str, Any]:
        body = params.body_fields()
        body["messages"] = [normalize_message(m) for m in messages]
        if tools:
            body["tools"] = tools
            if params.tool_choice is not None:
                body["tool_choice"] = params.tool_choice
        body.update(self.extra_body)
        body.update(params.extra_body)
        return body

    # -- one attempt ------------------------------------------------------------------------

    def _post(self, body: dict[str, Any], timeout: float) -> Any:
        try:
            response = self._http.post(self.url, json=body, timeout=timeout)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"timeout after {timeout:.1f}s ({type(exc).__name__})") from exc
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise LLMRequestError(f"bad base_url {self.base_url!r}: {exc}") from exc
        except httpx.RequestError as exc:  # connect/read/protocol/decoding errors
            raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
        status, text = response.status_code, response.text
        excerpt = text[:_EXCERPT]
        if status in (401, 403):
            raise LLMAuthError(f"HTTP {status} from {self.url}: {_error_message(text)}",
                               status=status, body_excerpt=excerpt)
        if is_retryable_status(status):
            raise _Retryable(f"HTTP {status}: {_error_message(text)}", status=status,
                             retry_after=_retry_after(response.headers.get("Retry-After")),
                             body_excerpt=excerpt)
        if status >= 400:
            raise LLMRequestError(f"HTTP {status} from {self.url}: {_error_message(text)}",
                                  status=status, body_excerpt=excerpt)
        try:
            return response.json()
        except ValueError:
            raise _Retryable(f"response body is not JSON: {excerpt[:120]!r}", status=status,
                             bad_response=True, body_excerpt=excerpt) from None

    # -- retry policy -----------------------------------------------------------------------

    def _request_timeout(self, params: ChatParams) -> float:
        if params.deadline_monotonic is None:
            return self.timeout_sec
        left = params.deadline_monotonic - time.monotonic()
        return max(0.1, min(self.timeout_sec, left))

    def _wait_for(self, failure: _Retryable, retries: int) -> float:
        if failure.retry_after is not None:
            return min(failure.retry_after, self.backoff_max_sec)
        ceiling = min(self.backoff_max_sec, self.backoff_base_sec * (2 ** retries))
        return self._rng.uniform(0.0, ceiling)  # "full jitter"

    def _stop_reason(self, failure: _Retryable, retries: int, bad_responses: int, wait: float,
                     params: ChatParams) -> str | None:
        """Why not to retry, or None to go on."""
        if retries >= self.max_retries:
            return f"max_retries={self.max_retries} reached"
        if failure.bad_response and bad_responses > MAX_BAD_RESPONSE_RETRIES:
            return "malformed twice"
        deadline = params.deadline_monotonic
        if deadline is not None and time.monotonic() + wait >= deadline:
            return f"deadline leaves no room for a {wait:.1f}s wait"
        return None

    def _emit_retry(self, attempt: int, failure: _Retryable, wait: float) -> None:
        if self._on_event is not None:
            self._on_event("llm_retry", {"attempt": attempt, "status": failure.status,
                                         "wait_sec": round(wait, 3), "error": str(failure)})


def _parse(data: Any, tools: list[dict[str, Any]] | None) -> ChatResult:
    try:
        return parse_completion(data, tools)
    except MalformedCompletion as exc:
        excerpt = json.dumps(data)[:_EXCERPT] if not isinstance(data, str) else data[:_EXCERPT]
        raise _Retryable(str(exc), status=exc.status, bad_response=not exc.transient,
                         body_excerpt=excerpt) from None


def _final_error(failure: _Retryable, retries: int, stop: str) -> LLMError:
    kind = LLMBadResponse if failure.bad_response else LLMRetryExhausted
    prefix = "malformed response" if failure.bad_response else "request failed"
    return kind(f"{prefix} after {retries + 1} attempt(s) ({stop}): {failure}",
                status=failure.status, retries=retries, body_excerpt=failure.body_excerpt)


def _is_loopback(url: str) -> bool:
    host = httpx.URL(url).host
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header (delta-seconds or HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_message(text: str) -> str:
    try:
        data = json.loads(text)
    except ValueError:
        return text[:200] or "(empty body)"
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])[:200]
    return text[:200]


def _ms_since(start: float) -> int:
    return int((time.monotonic() - start) * 1000)
