"""The same tool call failing the same way, again and again: a model that does not read its
errors. Every model-calling agent keeps one `RepeatedFailures` and stops
(AGENT_NO_PROGRESS / REPEATED_TOOL_ERROR) when a call's count reaches its limit
(`max_repeated_errors`, default 3): the identical call (tool name and arguments) with the
identical error type, in a row; any other call, or a success, starts the count again."""

from __future__ import annotations

import json
from typing import Any

REPEATED_TOOL_ERROR = "REPEATED_TOOL_ERROR"
DEFAULT_MAX_REPEATED_ERRORS = 3


class RepeatedFailures:
    def __init__(self) -> None:
        self.count = 0
        self.last: tuple[str, str, str] | None = None

    def see(self, name: str, arguments: Any, error: str | None) -> int:
        """Count one call's outcome (`error`: its error type, None when it succeeded); the
        identical failures in a row so far."""
        if error is None:
            self.count, self.last = 0, None
            return 0
        key = (name, json.dumps(arguments, sort_keys=True, default=str), error)
        self.count = self.count + 1 if key == self.last else 1
        self.last = key
        return self.count

    def summary(self) -> str:
        name, arguments, error = self.last or ("?", "", "?")
        return (f"the same {name} call failed {self.count} times in a row with {error} "
                f"(arguments {arguments[:200]})")
