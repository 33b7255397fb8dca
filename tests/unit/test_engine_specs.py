"""Engine specs: the `--agentbench-engine` syntax, its one-line errors, and where each spec points
(the docker CLI's order: DOCKER_HOST, DOCKER_CONTEXT, currentContext, the local socket; contexts
read from a fake DOCKER_CONFIG store written here)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pytest_agentbench.sandbox.docker.engine_spec import EngineSpec, check_unique, parse_engine
from pytest_agentbench.sandbox.docker.engine_store import LOCAL_SOCKET, TLSFiles, resolve


@pytest.mark.parametrize(("text", "expected"), [
    ("default", EngineSpec("default", "default")),
    ("mybox", EngineSpec("mybox", "mybox")),
    ("tcp://10.0.0.5:2376,slots=8", EngineSpec("tcp://10.0.0.5:2376", "tcp://10.0.0.5:2376", 8)),
    ("ssh://ci@host,slots=4", EngineSpec("ssh://ci@host", "ssh://ci@host", 4)),
    ("ssh://ci:secret@host:2222", EngineSpec("ssh://ci@host:2222", "ssh://ci:secret@host:2222")),
    ("unix:///run/docker.sock", EngineSpec("unix:///run/docker.sock", "unix:///run/docker.sock")),
    ("tcp://h:2375,tls=off,transfer=archive",
     EngineSpec("tcp://h:2375", "tcp://h:2375", None, True, "archive")),
    (" my-box.2 , slots=1 ", EngineSpec("my-box.2", "my-box.2", 1)),
])
def test_parse_engine(text: str, expected: EngineSpec) -> None:
    assert parse_engine(text) == expected


@pytest.mark.parametrize(("text", "says"), [
    ("", "no endpoint"),
    ("mybox,slots=0", "slots=0 is not a positive integer"),
    ("mybox,slots=two", "slots=two is not a positive integer"),
    ("mybox,slots", "unknown option 'slots'"),
    ("mybox,color=red", "unknown option 'color=red'"),
    ("mybox,transfer=nfs", "unknown option 'transfer=nfs'"),
    ("mybox,slots=2,slots=3", "option slots given twice"),
    ("http://h:2375", "scheme http:// is not supported"),
    ("https://h:2376", "tcp://HOST:PORT"),
    ("npipe:////./pipe/docker", "scheme npipe:// is not supported"),
    ("tcp://h", "the port is required"),
    ("tcp://h:port", "the port is not a number"),
    ("tcp://h:2376/path", "and nothing else"),
    ("unix://relative.sock", "unix:///absolute/path"),
    ("my box", "neither a Docker context name nor"),
])
def test_parse_errors_are_one_line_naming_the_value(text: str, says: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_engine(text)
    message = str(info.value)
    assert says in message
    assert "\n" not in message and f"engine {text.strip()!r}" in message


def test_check_unique() -> None:
    check_unique([parse_engine("default"), parse_engine("mybox")])
    with pytest.raises(ValueError, match="engine ssh://ci@h given twice"):
        check_unique([parse_engine("ssh://ci@h,slots=1"), parse_engine("ssh://ci:pw@h")])


# -- resolution -------------------------------------------------------------------------------
def write_context(config: Path, name: str, host: str, tls: tuple[str, ...] = (),
                  skip_verify: bool | None = None) -> Path:
    context_id = hashlib.sha256(name.encode()).hexdigest()
    meta = config / "contexts" / "meta" / context_id
    meta.mkdir(parents=True)
    endpoint: dict[str, object] = {"Host": host}
    if skip_verify is not None:
        endpoint["SkipTLSVerify"] = skip_verify
    (meta / "meta.json").write_text(json.dumps(
        {"Name": name, "Metadata": {}, "Endpoints": {"docker": endpoint}}))
    tls_dir = config / "contexts" / "tls" / context_id / "docker"
    if tls:
        tls_dir.mkdir(parents=True)
    for kind in tls:
        (tls_dir / f"{kind}.pem").write_text(kind)
    return tls_dir


def test_a_context_with_tls(tmp_path: Path) -> None:
    tls_dir = write_context(tmp_path, "box", "tcp://127.0.0.1:2376", ("ca", "cert", "key"))
    endpoint = resolve(parse_engine("box"), {"DOCKER_CONFIG": str(tmp_path)})
    assert endpoint.url == "tcp://127.0.0.1:2376" and endpoint.verify
    assert endpoint.tls == TLSFiles(str(tls_dir / "ca.pem"), str(tls_dir / "cert.pem"),
                                    str(tls_dir / "key.pem"))
    assert endpoint.via == "context box"


def test_a_context_store_under_home_without_docker_config(tmp_path: Path) -> None:
    write_context(tmp_path / ".docker", "box", "ssh://ci@far")
    endpoint = resolve(parse_engine("box"), {"HOME": str(tmp_path)})
    assert (endpoint.url, endpoint.tls) == ("ssh://ci@far", None)


def test_plain_or_unverified_tcp_contexts_are_refused_unless_allowed(tmp_path: Path) -> None:
    env = {"DOCKER_CONFIG": str(tmp_path)}
    write_context(tmp_path, "plain", "tcp://h:2375")
    write_context(tmp_path, "skip", "tcp://h:2376", ("ca", "cert", "key"), skip_verify=True)
    with pytest.raises(ValueError, match=r"^engine plain: tcp://h:2375 has no TLS: give a Docker "
                       r"context with TLS, DOCKER_CERT_PATH, or ,tls=off to allow plaintext$"):
        resolve(parse_engine("plain"), env)
    with pytest.raises(ValueError, match="TLS without verifying the engine"):
        resolve(parse_engine("skip"), env)
    assert resolve(parse_engine("plain,tls=off"), env).tls is None
    assert not resolve(parse_engine("skip,tls=off"), env).verify


def test_a_missing_context_names_the_store(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=f"Docker context 'gone' .* not found in {tmp_path}"):
        resolve(parse_engine("gone"), {"DOCKER_CONFIG": str(tmp_path)})


def test_default_follows_the_docker_cli_order(tmp_path: Path) -> None:
    write_context(tmp_path, "current", "ssh://a@current")
    write_context(tmp_path, "chosen", "ssh://a@chosen")
    (tmp_path / "config.json").write_text(json.dumps({"currentContext": "current"}))
    default = parse_engine("default")
    env = {"DOCKER_CONFIG": str(tmp_path)}
    assert resolve(default, env).url == "ssh://a@current"
    assert resolve(default, {**env, "DOCKER_CONTEXT": "chosen"}).url == "ssh://a@chosen"
    assert resolve(default, {**env, "DOCKER_CONTEXT": "default"}).url == LOCAL_SOCKET
    hosted = {**env, "DOCKER_CONTEXT": "chosen", "DOCKER_HOST": "unix:///run/other.sock"}
    assert resolve(default, hosted).url == "unix:///run/other.sock"
    assert resolve(default, {"DOCKER_CONFIG": str(tmp_path / "none")}).url == LOCAL_SOCKET
    assert resolve(default, {"DOCKER_CONFIG": str(tmp_path / "none")}).via == "local socket"


def test_default_with_a_tls_docker_host(tmp_path: Path) -> None:
    for kind in ("ca", "cert", "key"):
        (tmp_path / f"{kind}.pem").write_text(kind)
    env = {"DOCKER_HOST": "tcp://h:2376", "DOCKER_TLS_VERIFY": "1",
           "DOCKER_CERT_PATH": str(tmp_path)}
    endpoint = resolve(parse_engine("default"), env)
    assert endpoint.verify and endpoint.tls == TLSFiles(
        str(tmp_path / "ca.pem"), str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
    with pytest.raises(ValueError, match="DOCKER_TLS_VERIFY unset"):
        resolve(parse_engine("default"), {**env, "DOCKER_TLS_VERIFY": ""})
    with pytest.raises(ValueError, match="has no TLS"):
        resolve(parse_engine("default"), {"DOCKER_HOST": "tcp://h:2375"})


def test_a_tcp_url_takes_its_tls_from_docker_cert_path(tmp_path: Path) -> None:
    spec = parse_engine("tcp://h:2376")
    with pytest.raises(ValueError, match="has no TLS"):
        resolve(spec, {})
    (tmp_path / "ca.pem").write_text("ca")
    endpoint = resolve(spec, {"DOCKER_CERT_PATH": str(tmp_path)})
    assert endpoint.verify and endpoint.tls == TLSFiles(ca=str(tmp_path / "ca.pem"))


def test_a_context_pointing_nowhere_usable(tmp_path: Path) -> None:
    write_context(tmp_path, "pipe", "npipe:////./pipe/docker_engine")
    with pytest.raises(ValueError, match="is not a unix://, tcp:// or ssh:// URL"):
        resolve(parse_engine("pipe"), {"DOCKER_CONFIG": str(tmp_path)})


@pytest.mark.parametrize(("raw", "said"), [
    ("Error while fetching server API version: ('Connection aborted.', "
     "FileNotFoundError(2, 'No such file or directory'))", "no socket there"),
    ("HTTPSConnectionPool(host='h', port=2376): Max retries exceeded (Caused by SSLError("
     "SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed')))",
     "TLS: the engine's certificate is not signed by the CA given"),
    ("400 Client Error: Bad Request (\"Client sent an HTTP request to an HTTPS server.\")",
     "plain HTTP to a TLS port"),
    ("something new\n  on two lines", "something new on two lines"),
])
def test_unreachable_engines_say_why_in_the_users_terms(raw: str, said: str) -> None:
    from pytest_agentbench.sandbox.docker.engines import _one_line

    assert _one_line(RuntimeError(raw)).startswith(said)
