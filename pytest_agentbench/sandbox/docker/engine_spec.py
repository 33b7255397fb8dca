"""An engine of the pool as the user writes it, parsed without docker (option parsing stays cheap):
`ENDPOINT[,slots=N][,tls=off][,transfer=bind|archive|auto]`, ENDPOINT being `default`, a Docker
context name, or a `unix://`, `tcp://` or `ssh://` URL. `sandbox/docker/engines.py` reaches them.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

TRANSFERS = ("auto", "bind", "archive")
CONTEXT_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.+-]*$")  # the docker CLI's rule
SCHEMES = ("unix", "tcp", "ssh")
# `scheme://user:password@`: the password up to the last `@` before the host (a password may
# hold `@` and `:`; stops at whitespace, quotes, `/` and `,`, which end a URL's authority here)
_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@,'\"]*):"
                       r"[^\s/,'\"]*@(?=[^\s@/,'\"]*(?:[\s/,'\"]|$))")


@dataclass(frozen=True)
class EngineSpec:
    """One engine of the pool, as the user wrote it.

    name: what records and messages call it (the context name, `default`, or the URL without
    a password). endpoint: as written. slots: attempts at once (None: `default_slots`).
    allow_plaintext: `tls=off` was given. transfer: how workspaces reach containers ("auto":
    the factory probes with `shares_filesystem`)."""

    name: str
    endpoint: str
    slots: int | None = None
    allow_plaintext: bool = False
    transfer: str = "auto"


def redact_url(text: str) -> str:
    """`text` with the password of every URL in it replaced by `***` (`tcp://me:***@host`):
    for every line that names an engine as given (the spec, the endpoint it resolves to, an
    error quoting either)."""
    return _PASSWORD.sub(r"\g<head>:***@", text)


def parse_engine(text: str) -> EngineSpec:
    """`ENDPOINT[,slots=N][,tls=off][,transfer=bind|archive|auto]` -> EngineSpec; ValueError
    (one line naming the value, its password left out) on anything else."""
    endpoint, *options = [part.strip() for part in text.strip().split(",")]
    where = f"engine {redact_url(text.strip())!r}"
    if not endpoint:
        raise ValueError(f"{where}: no endpoint (expected default, a Docker context name, or a "
                         "unix://, tcp:// or ssh:// URL)")
    name = _endpoint_name(endpoint, where)
    slots: int | None = None
    plaintext, transfer, seen = False, "auto", set()
    for option in options:
        key, eq, value = option.partition("=")
        if key in seen:
            raise ValueError(f"{where}: option {key} given twice")
        seen.add(key)
        if key == "slots" and eq:
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"{where}: slots={value} is not a positive integer")
            slots = int(value)
        elif key == "tls" and value in ("off", "on"):
            plaintext = value == "off"
        elif key == "transfer" and value in TRANSFERS:
            transfer = value
        else:
            raise ValueError(f"{where}: unknown option {option!r} (expected slots=N, tls=off or "
                             "transfer=bind|archive|auto)")
    return EngineSpec(name, endpoint, slots, plaintext, transfer)


def _endpoint_name(endpoint: str, where: str) -> str:
    if "://" not in endpoint:
        if not CONTEXT_NAME.match(endpoint):
            raise ValueError(f"{where}: {endpoint!r} is neither a Docker context name nor a "
                             "unix://, tcp:// or ssh:// URL")
        return endpoint
    url = urllib.parse.urlsplit(endpoint)
    if url.scheme not in SCHEMES:
        hint = " (a Docker engine over TCP is tcp://HOST:PORT)" if url.scheme.startswith(
            "http") else ""
        raise ValueError(f"{where}: scheme {url.scheme}:// is not supported; expected unix://, "
                         f"tcp:// or ssh://{hint}")
    try:
        port = url.port
    except ValueError:
        raise ValueError(f"{where}: the port is not a number") from None
    if url.scheme == "unix":
        if not url.path.startswith("/") or url.netloc:
            raise ValueError(f"{where}: expected unix:///absolute/path/to/docker.sock")
        return f"unix://{url.path}"
    if not url.hostname or url.path not in ("", "/") or url.query or url.fragment:
        raise ValueError(f"{where}: expected {url.scheme}://{'[USER@]' * (url.scheme == 'ssh')}"
                         f"HOST{':PORT' if url.scheme == 'tcp' else '[:PORT]'} and nothing else")
    if url.scheme == "tcp" and port is None:
        raise ValueError(f"{where}: expected tcp://HOST:PORT (the port is required)")
    user = f"{url.username}@" if url.username else ""
    return f"{url.scheme}://{user}{url.hostname}{f':{port}' if port else ''}"


def check_unique(specs: Iterable[EngineSpec]) -> None:
    """ValueError (one line) when two engines share a name."""
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ValueError(f"engine {spec.name} given twice (engine names must be unique)")
        seen.add(spec.name)
