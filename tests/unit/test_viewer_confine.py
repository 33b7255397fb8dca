"""The viewer serves files and runs inside the output root only (viewer/confine.py), and the
server refuses at the HTTP level: raw requests, so nothing normalizes the path first."""

from __future__ import annotations

import http.client
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_agentbench.viewer import confine
from pytest_agentbench.viewer.server import Viewer, ViewerError
from tests.support.viewer_roots import SECRET, paired_root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return paired_root(tmp_path)


@pytest.fixture
def viewer(root: Path) -> Iterator[Viewer]:
    v = Viewer(root, port=0).start()
    try:
        yield v
    finally:
        v.close()


def get(viewer: Viewer, path: str, host: str | None = None,
        method: str = "GET") -> tuple[int, bytes, dict[str, str]]:
    port = int(viewer.url.rsplit(":", 1)[1].strip("/"))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host or f"127.0.0.1:{port}")
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read(), {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


@pytest.mark.parametrize(("url", "status"), [
    ("/../../etc/passwd", 403),
    ("/%2e%2e/%2e%2e/etc/passwd", 403),
    ("/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd", 403),
    ("/run-a/..%2f..%2f..%2fetc%2fpasswd", 403),
    ("/run-a/%2e%2e/%2e%2e/outside/secret.txt", 403),
    ("//etc/passwd", 404),  # http.server makes it /etc/passwd: a path under the root
    ("/%2fetc/passwd", 403),
    ("/run-a\\..\\..\\etc\\passwd", 403),
    ("/run-a/%00/run.json", 403),
    ("/%ff%fe", 403),
    ("/leak/secret.txt", 403),  # a folder link in the root
    ("/run-a/leak.txt", 403),  # a file link in a run
    ("/run-a/tasks/linked/secret.txt", 403),  # a folder link inside a run
    ("/run-a/no-such-file", 404),
    ("/run-a/tasks", 404),  # a folder: no listing
    ("/%252e%252e/outside/secret.txt", 404),  # decoded once: a name "%2e%2e", not a climb
])
def test_paths_outside_the_root_are_refused(viewer: Viewer, url: str, status: int) -> None:
    got, body, headers = get(viewer, url)
    assert got == status, body
    assert SECRET.encode() not in body
    assert b"root:" not in body  # /etc/passwd's first line


def test_files_inside_the_root_are_served_as_sandboxed_text(viewer: Viewer, root: Path) -> None:
    status, body, headers = get(viewer, "/run-a/run.json")
    assert status == 200 and b'"run-a"' in body
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert headers["content-security-policy"].startswith("sandbox;")
    assert headers["x-content-type-options"] == "nosniff"
    (root / "run-a" / "page.html").write_text("<script>alert(1)</script>")
    status, body, headers = get(viewer, "/run-a/page.html")
    assert status == 200 and headers["content-type"].startswith("text/plain")


def test_api_names_outside_the_root_are_not_found(viewer: Viewer) -> None:
    for url in ("/_api/run?run=..", "/_api/run?run=../run-a", "/_api/run?run=leak",
                "/_api/run?run=%2e%2e%2foutside", "/_api/attempt?run=leak&task=x&index=0",
                "/_api/attempt?run=run-a&task=../../outside&index=0"):
        status, body, _ = get(viewer, url)
        assert status == 404, (url, body)
        assert SECRET.encode() not in body


def test_other_hosts_and_methods_are_refused(viewer: Viewer) -> None:
    assert get(viewer, "/_api/runs", host="evil.example:80")[0] == 403  # DNS rebinding
    assert get(viewer, "/_api/runs", host="127.0.0.1:1")[0] == 403
    assert get(viewer, "/_api/runs", host="localhost")[0] == 200
    status, _, headers = get(viewer, "/_api/runs", method="POST")
    assert status == 405 and headers["allow"] == "GET, HEAD"


def test_binds_loopback_only(root: Path) -> None:
    with pytest.raises(ViewerError, match="loopback"):
        Viewer(root, host="0.0.0.0")  # noqa: S104 - the refusal is the point
    with pytest.raises(ViewerError, match="no such output root"):
        Viewer(root / "nope")


def test_run_dir_accepts_runs_only(root: Path, tmp_path: Path) -> None:
    assert confine.run_dir(root, "run-a") == root / "run-a"
    for name in ("", ".", "..", "../runs/run-a", "run-a/", "leak", ".hidden", "a\0b",
                 "no-such-run"):
        assert confine.run_dir(root, name) is None, name
    linked = root / "run-c"
    linked.mkdir()
    os.symlink(tmp_path / "outside" / "secret.txt", linked / "run.json")
    assert confine.run_dir(root, "run-c") is None  # run.json a link: not a run
    assert confine.run_names(root) == ["run-a", "run-b"]


def test_url_to_rel() -> None:
    assert confine.url_to_rel("/run-a/tasks/t%20x/a.txt") == "run-a/tasks/t x/a.txt"
    assert confine.url_to_rel("/./run-a/./x") == "run-a/x"
    for bad in ("/..", "/a/../../b", "/%2e%2e", "//abs", "/a\\b", "/a%00b", "relative"):
        assert isinstance(confine.url_to_rel(bad), confine.Served), bad
