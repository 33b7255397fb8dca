"""Secret redaction for everything the harness writes (events, conversation, logs, records).

One compiled regex per `Redactor`, so it is cheap enough to run on every line written. It scrubs:
explicit secret values; the values of named environment variables (read from the environment
when at least MIN_SECRET_LEN long); and anything shaped like a credential even when nobody
declared it: `sk-...` keys (OpenAI, OpenRouter `sk-or-v1-...`, Anthropic), `Bearer <token>`,
AWS access key ids, GitHub tokens, and `user:password@` in URLs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

DEFAULT_SECRET_ENVS = ("AGENTBENCH_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY")
MIN_SECRET_LEN = 8
REDACTED = "[REDACTED]"

_PATTERNS = {
    # group name -> pattern; a group's own sub-groups are not used (see _replace)
    "sk": r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{16,}",
    "bearer": r"(?i:\bbearer)\s+[A-Za-z0-9._~+/=-]{8,}",
    "aws": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "github": r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
    "urlcred": r"(?i:\b[a-z][a-z0-9+.-]*://)[^\s/@:]+(?::[^\s/@]*)?@",
}


class Redactor:
    """`redact(text)` and `redact_obj(obj)`. Immutable; build a new one to add secrets."""

    def __init__(
        self, secrets: Iterable[str] = (), env_names: Iterable[str] = (),
        *, environ: Mapping[str, str] | None = None, include_default_envs: bool = True,
    ) -> None:
        env = os.environ if environ is None else environ
        names = [*(DEFAULT_SECRET_ENVS if include_default_envs else ()), *env_names]
        labels: dict[str, str] = {}
        for name in names:
            value = env.get(name, "")
            if len(value) >= MIN_SECRET_LEN:
                labels.setdefault(value, f"[REDACTED:{name}]")
        for secret in secrets:
            if secret and len(secret) >= MIN_SECRET_LEN:
                labels.setdefault(secret, REDACTED)
        self._labels = labels
        literals = sorted(labels, key=len, reverse=True)  # longest first: no partial overlaps
        parts = [f"(?P<literal>{'|'.join(map(re.escape, literals))})"] if literals else []
        parts += [f"(?P<{name}>{pattern})" for name, pattern in _PATTERNS.items()]
        self._regex = re.compile("|".join(parts))

    def redact(self, text: str) -> str:
        return self._regex.sub(self._replace, text) if text else text

    def redact_obj(self, obj: Any) -> Any:
        """A copy of `obj` with every string (dict keys included) redacted; other values kept."""
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {self.redact_obj(k): self.redact_obj(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.redact_obj(v) for v in obj]
        if isinstance(obj, tuple):
            return tuple(self.redact_obj(v) for v in obj)
        return obj

    def _replace(self, match: re.Match[str]) -> str:
        kind, text = match.lastgroup, match.group()
        if kind == "literal":
            return self._labels.get(text, REDACTED)
        if kind == "bearer":
            return text.split(None, 1)[0] + " " + REDACTED
        if kind == "urlcred":
            return text[: text.index("://") + 3] + REDACTED + "@"
        return REDACTED
