"""Where an engine spec points, resolved the way the docker CLI does it, without contacting
anything: which URL, which TLS files, and whether the engine's certificate is verified.

`default` is DOCKER_HOST when set (TLS from DOCKER_TLS_VERIFY / DOCKER_CERT_PATH), else the
context named by DOCKER_CONTEXT or by `currentContext` in $DOCKER_CONFIG/config.json (DOCKER_CONFIG
defaults to ~/.docker), else the local socket. A context is read from the CLI's store:
`contexts/meta/<sha256(name)>/meta.json` (endpoint `docker`: Host, SkipTLSVerify) and
`contexts/tls/<sha256(name)>/docker/{ca,cert,key}.pem`. A tcp:// URL given directly takes its
TLS files from DOCKER_CERT_PATH. Plain tcp:// (or TLS that verifies nothing) is refused unless
the spec says `tls=off`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_agentbench.sandbox.docker.engine_spec import EngineSpec, redact_url

LOCAL_SOCKET = "unix:///var/run/docker.sock"
SCHEMES = ("unix://", "tcp://", "ssh://")


@dataclass(frozen=True)
class TLSFiles:
    """Paths of the PEM files found (None: absent)."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None


@dataclass(frozen=True)
class Endpoint:
    """url: unix://, tcp:// or ssh://. tls: None for no TLS. verify: the engine's certificate is
    checked (against tls.ca, or the system roots without one). via: where it came from."""

    url: str
    tls: TLSFiles | None
    verify: bool
    via: str


def config_dir(env: Mapping[str, str]) -> Path:
    """The docker CLI's configuration directory: $DOCKER_CONFIG, else ~/.docker ($HOME's)."""
    if env.get("DOCKER_CONFIG"):
        return Path(env["DOCKER_CONFIG"]).expanduser()
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".docker"


def current_context(env: Mapping[str, str]) -> str | None:
    """`currentContext` of config.json, or None (no file, no field, unreadable file)."""
    try:
        data = json.loads((config_dir(env) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    name = data.get("currentContext") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else None


def read_context(name: str, env: Mapping[str, str], via: str) -> Endpoint:
    """The `docker` endpoint of a context in the CLI's store; ValueError when it is missing."""
    context_id = hashlib.sha256(name.encode()).hexdigest()
    store = config_dir(env) / "contexts"
    meta_file = store / "meta" / context_id / "meta.json"
    try:
        meta = json.loads(meta_file.read_text())
        endpoint = meta["Endpoints"]["docker"]
    except FileNotFoundError:
        raise ValueError(f"Docker context {name!r} ({via}) not found in {store} (see `docker "
                         "context ls`; DOCKER_CONFIG selects another store)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"Docker context {name!r}: unreadable {meta_file} ({exc})") from None
    host = endpoint.get("Host") or LOCAL_SOCKET
    skip_verify = bool(endpoint.get("SkipTLSVerify", False))
    tls_dir = store / "tls" / context_id / "docker"
    files = _pem_files(tls_dir)
    if files is None and skip_verify:
        files = TLSFiles()  # the CLI speaks TLS without checking the engine
    return Endpoint(host, files, files is not None and not skip_verify, f"context {name}")


def _pem_files(directory: Path) -> TLSFiles | None:
    found = {k: str(directory / f"{k}.pem") for k in ("ca", "cert", "key")
             if (directory / f"{k}.pem").is_file()}
    return TLSFiles(**found) if found else None


def from_environment(env: Mapping[str, str]) -> Endpoint:
    """`default`: DOCKER_HOST, else DOCKER_CONTEXT, else currentContext, else the socket."""
    host = env.get("DOCKER_HOST")
    if host:
        cert_path = env.get("DOCKER_CERT_PATH") or ""
        verify = env.get("DOCKER_TLS_VERIFY", "") != ""
        files = None
        if verify or cert_path or env.get("DOCKER_TLS", "") not in ("", "0", "false"):
            files = _pem_files(Path(cert_path) if cert_path else config_dir(env)) or TLSFiles()
        return Endpoint(host, files, verify and files is not None, "DOCKER_HOST")
    name, via = env.get("DOCKER_CONTEXT"), "DOCKER_CONTEXT"
    if not name:
        name, via = current_context(env), "currentContext in config.json"
    if name and name != "default":
        return read_context(name, env, via)
    return Endpoint(LOCAL_SOCKET, None, False, "local socket")


def resolve(spec: EngineSpec, environ: Mapping[str, str] | None = None) -> Endpoint:
    """The endpoint a spec names; ValueError (one line) when it cannot be used as asked."""
    env = os.environ if environ is None else environ
    if spec.endpoint == "default":
        endpoint = from_environment(env)
    elif "://" in spec.endpoint:
        files = None
        if spec.endpoint.startswith("tcp://") and env.get("DOCKER_CERT_PATH"):
            files = _pem_files(Path(env["DOCKER_CERT_PATH"]))
        verify = files is not None and files.ca is not None
        endpoint = Endpoint(spec.endpoint, files, verify, "URL")
    else:
        endpoint = read_context(spec.endpoint, env, "named")
    return _checked(spec, endpoint)


def _checked(spec: EngineSpec, endpoint: Endpoint) -> Endpoint:
    try:
        return _usable(spec, endpoint)
    except ValueError as exc:  # the URL may come with a password (DOCKER_HOST, a context)
        raise ValueError(redact_url(str(exc))) from None


def _usable(spec: EngineSpec, endpoint: Endpoint) -> Endpoint:
    if not endpoint.url.startswith(SCHEMES):
        raise ValueError(f"engine {spec.name}: {endpoint.url} ({endpoint.via}) is not a unix://, "
                         "tcp:// or ssh:// URL")
    if not endpoint.url.startswith("tcp://") or spec.allow_plaintext:
        return endpoint
    if endpoint.tls is None:
        raise ValueError(f"engine {spec.name}: {endpoint.url} has no TLS: give a Docker context "
                         "with TLS, DOCKER_CERT_PATH, or ,tls=off to allow plaintext")
    if not endpoint.verify:
        raise ValueError(f"engine {spec.name}: {endpoint.url} ({endpoint.via}) uses TLS without "
                         "verifying the engine (no CA, SkipTLSVerify, or DOCKER_TLS_VERIFY unset):"
                         " give a CA, or ,tls=off to allow it")
    return endpoint
