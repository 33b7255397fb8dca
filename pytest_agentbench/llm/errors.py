"""The LLM client's exception tree. Every failure the client raises is an `LLMError`:

    LLMError                 base; the attempt maps any of these to LLM_ERROR
    ├── LLMAuthError         401/403: bad or missing key, forbidden model (never retried)
    ├── LLMRequestError      any other 4xx (400, 402 out of credits, 404 unknown model...):
    │                        retrying the same request cannot help
    ├── LLMBadResponse       2xx whose body is not a chat completion (non-JSON, no `choices`),
    │                        after one retry in case it was transient
    └── LLMRetryExhausted    connect errors, timeouts, 408/429/5xx until `max_retries` ran out
                             (or the caller's deadline left no room for another wait)

A tool call whose arguments are not valid JSON is *not* an error: it comes back as a `ToolCall`
with `arguments_error` set so the agent can tell the model.
"""

from __future__ import annotations


class LLMError(Exception):
    """Base class. `status` is the last HTTP status seen (None for transport errors), `retries`
    how many times the request was re-sent, `body_excerpt` the start of the last response body."""

    def __init__(
        self, message: str, *, status: int | None = None, retries: int = 0, body_excerpt: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retries = retries
        self.body_excerpt = body_excerpt


class LLMAuthError(LLMError):
    """The server refused the credentials (401) or the request (403)."""


class LLMRequestError(LLMError):
    """A non-retryable client error (4xx other than 401/403/408/429)."""


class LLMBadResponse(LLMError):
    """The server answered 2xx with something that is not a chat completion."""


class LLMRetryExhausted(LLMError):
    """Every attempt failed with a retryable error; `attempts` = retries + 1."""

    @property
    def attempts(self) -> int:
        return self.retries + 1
