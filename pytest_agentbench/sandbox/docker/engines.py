"""Docker engines by name: parse `--agentbench-engine` values, resolve them the docker CLI's way
(DOCKER_HOST, Docker contexts, the local socket), connect, describe, and probe whether an engine
shares the controller's filesystem.

An engine is written `ENDPOINT[,slots=N][,tls=off][,transfer=bind|archive|auto]`: ENDPOINT is
`default` (what the docker CLI would use), a Docker context name, or a `unix://`, `tcp://` or
`ssh://` URL. A `tcp://` engine must be reached over verified TLS unless `tls=off` allows
plaintext (or unverified TLS). An `ssh://` engine is reached through the user's own `ssh` binary
and ~/.ssh/config, as the docker CLI does (`docker system dial-stdio` on the far side), behind a
local socket (`ssh_bridge`).
Parsing lives in `engine_spec` and resolution (which URL, which TLS files) in `engine_store`,
both without docker (option parsing stays cheap); this module adds what needs an engine.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import tarfile
import tempfile
import threading
import urllib.parse
import weakref
from collections.abc import Mapping
from io import BytesIO
from pathlib import Path
from typing import Any

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.transport import UnixHTTPAdapter
from docker.types import Mount

from pytest_agentbench.sandbox.docker.engine_spec import (
    EngineSpec,
    check_unique,
    parse_engine,
    redact_url,
)
from pytest_agentbench.sandbox.docker.engine_store import Endpoint, resolve
from pytest_agentbench.sandbox.docker.ssh_bridge import SshBridge
from pytest_agentbench.sandbox.port import SandboxError

__all__ = ["EngineSpec", "EngineUnreachable", "check_unique", "connect", "default_slots",
           "engine_info", "parse_engine", "shares_filesystem"]
PROBE_LABELS = {"agentbench": "1", "agentbench.probe": "1"}  # swept by `agentbench gc`


class EngineUnreachable(SandboxError):
    """An engine does not answer (or cannot be addressed); `str()` is one line for the user."""

    def __init__(self, name: str, why: str, url: str = "") -> None:
        why = _without_password(why, url)
        self.name, self.why = name, why
        super().__init__(f"engine {name}: unreachable ({why})")


def _without_password(text: str, url: str) -> str:
    """`text` with every URL's password redacted, and `url`'s own wherever it appears (an
    error that quotes it outside a URL)."""
    text = redact_url(text)
    try:
        password = urllib.parse.urlsplit(url).password if url else None
    except ValueError:
        password = None
    return text.replace(password, "***") if password and len(password) >= 3 else text


# -- reaching an engine -------------------------------------------------------------------------
def connect(spec: EngineSpec, timeout: float = 30.0,
            environ: Mapping[str, str] | None = None) -> docker.DockerClient:
    """A client for the engine, checked with a ping; EngineUnreachable when it does not answer
    within `timeout` (the ping runs on a helper thread, so nothing can hang the caller),
    ValueError when the engine cannot be addressed as asked (no TLS, no such context, ...).

    `timeout` is also the client's read timeout for every later call (a frozen engine surfaces
    as a ReadTimeout after it; exec output streams are not bounded by it). `environ` only
    decides where the spec points (engine_store.resolve); ssh reads the process's own HOME and
    PATH, and a TLS client ignores proxy and CA-bundle variables (trust_env off)."""
    endpoint = resolve(spec, environ)
    result: dict[str, Any] = {}
    lock = threading.Lock()

    def attempt() -> None:
        try:
            result["client"] = (_ssh_client(spec.name, endpoint.url, timeout)
                                if endpoint.url.startswith("ssh://") else
                                _client(endpoint, timeout))
            result["client"].ping()
        except (DockerException, requests.RequestException, OSError, EngineUnreachable) as exc:
            result["error"] = exc
        with lock:
            result["done"] = True
            if result.get("abandoned") and "client" in result:  # the caller gave up: no leak
                result["client"].close()

    worker = threading.Thread(target=attempt, name=f"connect-{spec.name}", daemon=True)
    worker.start()
    worker.join(timeout)
    with lock:
        if not result.get("done"):
            result["abandoned"] = True
            raise EngineUnreachable(spec.name, f"no answer from {endpoint.url} in {timeout:g}s",
                                    endpoint.url)
    if isinstance(result.get("error"), EngineUnreachable):
        raise result["error"]
    if "error" in result:
        raise EngineUnreachable(spec.name, f"{endpoint.url}: {_one_line(result['error'])}",
                                endpoint.url)
    client: docker.DockerClient = result["client"]
    return client


def _client(endpoint: Endpoint, timeout: float) -> docker.DockerClient:
    kwargs: dict[str, Any] = {"base_url": endpoint.url, "timeout": int(max(1, timeout))}
    if endpoint.tls is not None:
        from docker.tls import TLSConfig

        files = endpoint.tls
        kwargs["tls"] = TLSConfig(
            client_cert=(files.cert, files.key) if files.cert and files.key else None,
            ca_cert=files.ca, verify=endpoint.verify)
    if endpoint.tls is None:
        return docker.DockerClient(**kwargs)
    # requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE (set behind TLS-intercepting proxies)
    # override the session's CA (psf/requests#3829): the engine's own CA would be ignored and
    # its certificate refused. So the session ignores the environment (no proxy from there
    # applies either), and the API version is asked for by hand: docker-py's "auto" asks in
    # the constructor, before the session could be told.
    probe = docker.DockerClient(**kwargs, version=docker.constants.MINIMUM_DOCKER_API_VERSION)
    probe.api.trust_env = False
    try:
        version = str(probe.api.version(api_version=False)["ApiVersion"])
    finally:
        probe.close()
    client = docker.DockerClient(**kwargs, version=version)
    client.api.trust_env = False
    return client


class BridgedClient(docker.DockerClient):  # type: ignore[misc]
    """A client of an ssh:// engine: closing it ends its SshBridge too."""

    bridge: SshBridge

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.bridge.close()


class OnePoolAdapter(UnixHTTPAdapter):  # type: ignore[misc]
    """docker-py keeps one connection pool per request URL on a unix socket (every container id
    its own connection): free locally, a new ssh channel and remote docker CLI (~0.2-0.4 s) per
    URL through a bridge. One pool for every URL reuses the open connections."""

    def get_connection(self, url: str, proxies: Any = None) -> Any:
        return super().get_connection("http+docker://localhost/", proxies)


def _ssh_client(name: str, url: str, timeout: float) -> docker.DockerClient:
    """A client over an SshBridge, after one ping through ssh in batch mode, so a password
    prompt, an unknown host key, no docker on the far side or a silent daemon fails in time
    with ssh's own words."""
    if shutil.which("ssh") is None:
        raise EngineUnreachable(name, "ssh:// needs the ssh client on PATH")
    bridge = SshBridge(url, timeout)
    try:
        answered, why = bridge.ping(timeout)
        if not answered:
            raise EngineUnreachable(name, f"ssh {url}: {why}", url)
        client = BridgedClient(base_url=bridge.url, timeout=int(max(1, timeout)))
        adapter = OnePoolAdapter(f"http+unix://{bridge.path}", int(max(1, timeout)))
        client.api.mount("http+docker://", adapter)
        client.api._custom_adapter = adapter
    except BaseException:
        bridge.close()
        raise
    client.bridge = bridge
    weakref.finalize(client, bridge.close).atexit = False  # ssh_bridge closes it at exit
    return client


# the usual causes, as the user can act on them (first match wins; the text is docker-py's,
# requests', urllib3's or ssl's)
CAUSES = (
    ("Client sent an HTTP request to an HTTPS server", "plain HTTP to a TLS port (give the "
     "engine's TLS material instead of ,tls=off)"),
    ("CERTIFICATE_VERIFY_FAILED", "TLS: the engine's certificate is not signed by the CA given"),
    ("certificate required", "TLS: the engine wants a client certificate (cert.pem, key.pem)"),
    ("BAD_CERTIFICATE", "TLS: the engine refused the client certificate"),
    ("UNKNOWN_CA", "TLS: the engine does not trust the client certificate's CA"),
    ("WRONG_VERSION_NUMBER", "TLS: the port does not speak TLS"),
    ("No such file or directory", "no socket there"),
    ("Permission denied", "permission denied (not in the docker group?)"),
    ("Connection refused", "connection refused"),
    ("Failed to resolve", "cannot resolve the host name"),
    ("Read timed out", "no answer in time"),
    ("timed out", "no answer in time"),
    ("Connection aborted", "the connection was closed without an answer"),
)


def _one_line(exc: BaseException) -> str:
    """What went wrong, in words the user can act on, else docker-py's own (one line)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    for needle, cause in CAUSES:
        if needle in text:
            return cause
    return text if len(text) <= 300 else text[:297] + "..."


# -- what an engine is --------------------------------------------------------------------------
def engine_info(client: docker.DockerClient) -> dict[str, Any]:
    """The engine's identity and size, as records and `doctor` name them."""
    info = client.info()
    version = client.version()
    return {"name": info.get("Name"), "id": info.get("ID"), "version": version.get("Version"),
            "api_version": version.get("ApiVersion"), "os": info.get("OperatingSystem"),
            "os_type": info.get("OSType"), "arch": info.get("Architecture"),
            "kernel": info.get("KernelVersion"), "ncpu": info.get("NCPU"),
            "mem_bytes": info.get("MemTotal"), "docker_root_dir": info.get("DockerRootDir")}


def default_slots(info: Mapping[str, Any]) -> int:
    """Attempts at once on an engine whose spec names no slots: its CPU count (at least 1). An
    attempt's commands are mostly CPU-bound test runs; the controller side is I/O-bound."""
    ncpu = info.get("ncpu")
    return max(1, int(ncpu)) if isinstance(ncpu, int) else 1


def shares_filesystem(client: docker.DockerClient, probe_root: Path,
                      image: str | None = None) -> bool:
    """Whether this engine's containers see the controller's directories under `probe_root`: a
    random token is bind-mounted (read-only) into a created, never started, container and read
    back through the engine's archive API. A missing bind source, another token, or no image to
    create from all mean False (archive transfer, always safe). Leaves nothing behind."""
    probe_root.mkdir(parents=True, exist_ok=True)
    probe = Path(tempfile.mkdtemp(prefix="agentbench-fsprobe-", dir=probe_root))
    token = secrets.token_hex(16)
    container_id = None
    try:
        (probe / "token").write_text(token)
        probe.chmod(0o755)
        (probe / "token").chmod(0o644)
        chosen = image or _any_image(client)
        if chosen is None:
            return False
        try:
            created = client.api.create_container(
                chosen, command=["true"], labels=PROBE_LABELS, network_disabled=True,
                host_config=client.api.create_host_config(
                    mounts=[Mount("/probe", str(probe), type="bind", read_only=True)],
                    network_mode="none"))
        except (ImageNotFound, NotFound):
            return False
        except APIError as exc:
            if "bind source path does not exist" in str(exc) or "not a directory" in str(exc):
                return False
            raise
        container_id = created["Id"]
        try:
            stream, _ = client.api.get_archive(container_id, "/probe/token")
        except NotFound:
            return False
        return _archive_text(b"".join(stream)) == token
    finally:
        if container_id is not None:
            with contextlib.suppress(NotFound):
                client.api.remove_container(container_id, force=True, v=True)
        shutil.rmtree(probe, ignore_errors=True)


def _any_image(client: docker.DockerClient) -> str | None:
    """The runner image when present, else the smallest image the engine has."""
    from pytest_agentbench.sandbox.docker.image import DEFAULT_IMAGE

    try:
        return str(client.api.inspect_image(DEFAULT_IMAGE)["Id"])
    except ImageNotFound:
        pass
    images = sorted(client.api.images(), key=lambda i: i.get("Size") or 0)
    return str(images[0]["Id"]) if images else None


def _archive_text(data: bytes) -> str | None:
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        member = next((m for m in tar.getmembers() if m.isfile()), None)
        handle = tar.extractfile(member) if member is not None else None
        return handle.read().decode(errors="replace") if handle is not None else None
