"""Secret redaction for everything the harness writes (events, conversation, logs, records,
the frozen task.yaml, run.json and the reports).

One compiled regex per `Redactor`, so it is cheap enough to run on every line written. It scrubs:
explicit secret values; the values of named environment variables (read from the environment
when at least MIN_SECRET_LEN long); and anything shaped like a credential even when nobody
declared it: `sk-...` keys (OpenAI, OpenRouter `sk-or-v1-...`, Anthropic), `Bearer <token>`,
AWS access key ids, GitHub tokens, userinfo in URLs (`https://user:tok@host`, `git+https://...`,
and the password of a scp-like `user:pw@host:path`), `NAME=value` where NAME looks secret
(`GITHUB_TOKEN=...`, `DB_PASSWORD=...`), `--password X` / `--token=X` style options, `curl -u
user:pw`, `mysql -pX`, `sshpass -p X`, and `Authorization:` (or `X-Api-Key:`) header values.

`Redactor.for_task(spec)` adds what a task file itself reveals: every credential those patterns
find in the task's own text (repo.url, setup commands, ...) becomes a literal secret, so it is
scrubbed wherever it shows up later (a git error quoting just the token), together with the
variables named in `artifacts.redact` and the secret-looking `$NAME`s its commands use.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

DEFAULT_SECRET_ENVS = ("AGENTBENCH_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY")
MIN_SECRET_LEN = 8
REDACTED = "[REDACTED]"
#: record and event fields that identify things; never rewritten (a resume matches on them)
IDENTITY_KEYS = frozenset(
    {"run_id", "attempt_id", "task_id", "suite", "variant", "variant_config_hash", "event_id",
     "span_id", "parent_event_id", "attempt_index", "seq", "type", "ts"}
)

# A secret-looking variable name: a whole `_`-separated component says so (GIT_AUTHOR_NAME and
# MAX_TOKENS do not).
_SECRET_WORDS = (r"(?:TOKEN|SECRET|PASSWORD|PASSWD|AUTH|CREDENTIALS?|API_?KEY|ACCESS_?KEY"
                 r"|PRIVATE_?KEY)")
SECRET_NAME = rf"(?:[A-Z0-9]+_)*{_SECRET_WORDS}(?:_[A-Z0-9]+)*"
_VALUE = r"""(?:"[^"\n]*"|'[^'\n]*'|[^\s"';&|)]+)"""
_FLAG_WORDS = (r"(?:password|passwd|token|secret|api-?key|access-?key|private-?key|auth"
               r"|credentials?)")

_PATTERNS = {
    # group name -> pattern; no capturing sub-groups (see _replace and _SPLITTERS)
    "sk": r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{16,}",
    "bearer": r"(?i:\bbearer)\s+[A-Za-z0-9._~+/=-]{8,}",
    "aws": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "github": r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
    "urlcred": r"(?i:\b[a-z][a-z0-9+.-]*://)[^\s/?#\"'<>]+@",
    "scp": r"(?<![\w/:@.+-])[A-Za-z0-9._~+-]+:[^\s@/:\"'<>]+@(?=[A-Za-z0-9][A-Za-z0-9.-]*:)",
    "assign": rf"(?<![\w$]){SECRET_NAME}={_VALUE}",
    "flag": rf"(?i:(?<![\w-])--(?:[a-z0-9]+-)*{_FLAG_WORDS}(?:=|[ \t]+))(?!-){_VALUE}",
    "header": r"(?i:\b(?:proxy-)?authorization|\bx-api-key|\bprivate-token|\bx-auth-token)"
    r"[ \t]*:[ \t]*[^\s\"'\\][^\r\n\"'\\]*",
    "curlu": r"(?<![\w-])-u[ \t]+[^\s:\"']+:(?!\d+\b)[^\s\"']+",
    "shortp": r"\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n;&|]*?[ \t]-p[^\s-]\S*"
    r"|\bsshpass[ \t]+-p[ \t]*[^\s-]\S*",
}

# For the kinds that keep a visible prefix: (prefix, secret value) of a matched text.
_SPLITTERS: dict[str, Callable[[str], tuple[str, str]]] = {
    "bearer": lambda t: (t.split(None, 1)[0] + " ", t.split(None, 1)[1]),
    "urlcred": lambda t: (t[: t.index("://") + 3], t[t.index("://") + 3 : -1]),
    "scp": lambda t: (t[: t.index(":") + 1], t[t.index(":") + 1 : -1]),
    "assign": lambda t: (t[: t.index("=") + 1], t[t.index("=") + 1 :]),
    "flag": lambda t: _split_at(re.match(r"--[^=\s]+(?:=|[ \t]+)", t)),
    "header": lambda t: _split_at(re.match(r"[^:]*:[ \t]*", t)),
    "curlu": lambda t: (t[: t.index(":") + 1], t[t.index(":") + 1 :]),
    "shortp": lambda t: _split_at(re.match(r"(?s).*[ \t]-p[ \t]*", t)),
}
_SUFFIX = {"urlcred": "@", "scp": "@"}


def _split_at(match: re.Match[str] | None) -> tuple[str, str]:
    assert match is not None  # the pattern matched the same text
    return match.group(), match.string[match.end() :]


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

    @classmethod
    def for_task(cls, spec: Any, *, environ: Mapping[str, str] | None = None,
                 extra_env_names: Iterable[str] = ()) -> Redactor:
        """A redactor that also knows the secrets a task's own file reveals (see module doc)."""
        return cls.for_tasks([spec], environ=environ, extra_env_names=extra_env_names)

    @classmethod
    def for_tasks(cls, specs: Iterable[Any], *, environ: Mapping[str, str] | None = None,
                  extra_env_names: Iterable[str] = ()) -> Redactor:
        """One redactor for a whole run: the union of every task's secrets."""
        secrets: set[str] = set()
        names: list[str] = list(extra_env_names)
        for spec in specs:
            texts = list(_strings(spec.model_dump(mode="json")))
            secrets.update(s for text in texts for s in credentials_in(text))
            names += [n for n in spec.artifacts.redact if _ENV_NAME.fullmatch(n)]
            secrets.update(n for n in spec.artifacts.redact if not _ENV_NAME.fullmatch(n))
            names += [n for text in texts for n in _REFERENCE.findall(text)]
        return cls(sorted(secrets), dict.fromkeys(names), environ=environ)

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

    def redact_record(self, record: dict[str, Any]) -> dict[str, Any]:
        """`redact_obj` of an attempt record or event, its identity fields (IDENTITY_KEYS) kept
        as they are: a resume and the reports match attempts by them."""
        return {k: v if k in IDENTITY_KEYS else self.redact_obj(v) for k, v in record.items()}

    def _replace(self, match: re.Match[str]) -> str:
        kind, text = match.lastgroup, match.group()
        if kind == "literal":
            return self._labels.get(text, REDACTED)
        splitter = _SPLITTERS.get(kind or "")
        if splitter is None:
            return REDACTED
        prefix, value = splitter(text)
        label = self._labels.get(_unquote(value), REDACTED)  # a declared secret keeps its name
        return prefix + label + _SUFFIX.get(kind or "", "")


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REFERENCE = re.compile(rf"\$\{{?({SECRET_NAME})\b")
_FINDER = re.compile("|".join(f"(?P<{name}>{pattern})" for name, pattern in _PATTERNS.items()))


def credentials_in(text: str) -> list[str]:
    """The secret values the credential patterns find in `text` (quotes stripped; references
    such as `$TOKEN` and values shorter than MIN_SECRET_LEN left out)."""
    found: list[str] = []
    for match in _FINDER.finditer(text):
        kind, whole = match.lastgroup or "", match.group()
        splitter = _SPLITTERS.get(kind)
        value = _unquote(splitter(whole)[1]) if splitter else whole
        candidates = [value]
        if kind in ("urlcred", "header", "bearer") and (":" in value or " " in value):
            candidates.append(re.split(r"[: ]", value, maxsplit=1)[1])  # the password/token
        found += [c for c in candidates if len(c) >= MIN_SECRET_LEN and "$" not in c]
    return found


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _strings(obj: Any) -> Iterable[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _strings(value)
    elif isinstance(obj, list | tuple):
        for value in obj:
            yield from _strings(value)
