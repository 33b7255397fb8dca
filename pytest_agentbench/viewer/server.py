"""The viewer's HTTP server: the standard library's ThreadingHTTPServer on a loopback address.

Routes (GET and HEAD only; anything else 405):
- `/` and `/index.html` -> `/_view/`; `/_view/` (runs, live), `/_view/run?run=R` (one run, live),
  `/_view/side?a=A&b=B&task=T&ai=0&bi=0` (one task in two runs), `/_view/search?q=Q&in=F`;
- `/_view/paired?a=A&b=B` and `/_view/compare?run=A&run=B...`: reporting's pages
  (`missing=skip`, `infra=failure`, `allow_mismatch=FIELD` as the report commands' options);
- `/_api/runs`, `/_api/run?run=R`, `/_api/attempt?run=R&task=T&index=N`, `/_api/search?q=Q&in=F`:
  the JSON the pages poll;
- `/_static/viewer.js|viewer.css`;
- `/<run>/report.html`: reporting's run page rendered now; any other path: that file of the root
  as sandboxed text (confine.py: outside the root or through a link 403, absent 404).
A request whose Host is not the loopback address the server listens on is refused (403): a web
page cannot reach the viewer through a name of its own that resolves to 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from pytest_agentbench.reporting.names import ReportError
from pytest_agentbench.viewer import confine, pages
from pytest_agentbench.viewer.data import NotFound, Store
from pytest_agentbench.viewer.search import search

LOOPBACK_NAMES = ("localhost",)
_STATIC = {"/_static/viewer.js": "text/javascript", "/_static/viewer.css": "text/css"}
_SHELLS = {"/_view/": "index", "/_view/run": "run", "/_view/side": "side",
           "/_view/search": "search"}


class ViewerError(Exception):
    """The viewer cannot start (a non-loopback host, a port in use, no such root)."""


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Handler(BaseHTTPRequestHandler):
    server_version = "agentbench-view"
    sys_version = ""
    store: Store  # set on the class made per server
    port: int

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # one line per request would bury the URL the command printed

    # ------------------------------------------------------------------ answers

    def _send(self, status: int, body: bytes, ctype: str, csp: str,
              extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", csp)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.send_header("Cache-Control", "no-store")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _html(self, text: str, status: int = 200, csp: str = pages.VIEWER_CSP) -> None:
        self._send(status, text.encode("utf-8"), "text/html; charset=utf-8", csp)

    def _json(self, obj: Any, status: int = 200) -> None:
        body = json.dumps(obj, ensure_ascii=False, allow_nan=False).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8", pages.RAW_CSP)

    def _redirect(self, where: str) -> None:
        self._send(302, b"", "text/plain; charset=utf-8", pages.RAW_CSP, {"Location": where})

    def _text(self, status: int, text: str) -> None:
        self._send(status, (text + "\n").encode("utf-8"), "text/plain; charset=utf-8",
                   pages.RAW_CSP)

    # ------------------------------------------------------------------ methods

    def do_GET(self) -> None:  # noqa: N802 - the base's name
        try:
            self._route()
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # one line to the terminal and the browser, no traceback
            line = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            print(f"agentbench view: {self.path[:200]}: {line}", file=sys.stderr)
            self._text(500, f"internal error: {line}")

    do_HEAD = do_GET

    def _refuse_method(self) -> None:
        self._send(405, b"GET only\n", "text/plain; charset=utf-8", pages.RAW_CSP,
                   {"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method

    # ------------------------------------------------------------------ routes

    def _host_ok(self) -> bool:
        host = (self.headers.get("Host") or "").strip()
        name, port = host, ""
        if ":" in host and not host.endswith("]"):  # host:port, [v6]:port (not a bare [v6])
            name, _, port = host.rpartition(":")
        return _is_loopback(name) and port in ("", str(self.port))

    def _route(self) -> None:
        if not self._host_ok():
            self._text(403, "refused: the Host header is not this viewer's loopback address")
            return
        # not urlsplit: it would read `//etc/passwd` as a host and a path `/passwd`
        path, _, raw_query = self.path.partition("#")[0].partition("?")
        query = parse_qs(raw_query)
        store = self.store
        if path in ("/", "/index.html", "/_view", "/_view/index.html"):
            self._redirect("/_view/")
        elif path in _SHELLS:
            self._html(pages.shell(_SHELLS[path], store.root))
        elif path in _STATIC:
            self._send(200, pages.static_file(path.rsplit("/", 1)[1]),
                       f"{_STATIC[path]}; charset=utf-8", pages.RAW_CSP)
        elif path.startswith("/_api/"):
            self._api(path[len("/_api/"):], query)
        elif path in ("/_view/paired", "/_view/compare"):
            self._report_page(path, query)
        else:
            self._file(path)

    def _api(self, name: str, query: dict[str, list[str]]) -> None:
        def arg(key: str, default: str = "") -> str:
            return (query.get(key) or [default])[-1]

        store = self.store
        try:
            if name == "runs":
                self._json(store.runs())
            elif name == "run":
                self._json(store.run(arg("run")))
            elif name == "attempt":
                index = arg("index", "0")
                if not index.isdigit():
                    raise ValueError(f"index={index!r}: expected an attempt number")
                self._json(store.attempt(arg("run"), arg("task"), int(index)))
            elif name == "search":
                self._json(search(store, arg("q"), arg("in", "all")))
            else:
                self._json({"error": f"no such endpoint: {name}"}, 404)
        except NotFound as exc:
            self._json({"error": str(exc)}, 404)
        except (ValueError, ReportError) as exc:
            self._json({"error": " ".join(str(exc).split())[:500]}, 400)

    def _report_page(self, path: str, query: dict[str, list[str]]) -> None:
        store = self.store
        try:
            options = pages.pairing_options(query)
            if path == "/_view/paired":
                a, b = (query.get("a") or [""])[-1], (query.get("b") or [""])[-1]
                text = pages.paired_page(store, a, b, options)
            else:
                text = pages.compare_page(store, query.get("run", []), options)
        except NotFound as exc:
            self._html(pages.error_page("Not found", str(exc)), 404)
            return
        except (ValueError, ReportError) as exc:  # a refused pairing: its one line
            self._html(pages.error_page("Cannot pair these runs",
                                        " ".join(str(exc).split())[:2000]), 400)
            return
        self._html(text, csp=pages.report_csp())

    def _file(self, path: str) -> None:
        rel = confine.url_to_rel(path)
        parts = rel.split("/") if isinstance(rel, str) else []
        if len(parts) == 2 and parts[1] == "report.html" and \
                confine.run_dir(self.store.root, parts[0]) is not None:
            try:
                text = pages.run_page(self.store, parts[0])
            except ReportError as exc:
                self._html(pages.error_page("Run page", str(exc)), 400)
                return
            self._html(text, csp=pages.report_csp())
            return
        served = confine.read_file(self.store.root, path)
        if served.status != 200:
            self._text(served.status, served.why)
            return
        data = served.data
        try:
            data.decode("utf-8")
            ctype = "text/plain; charset=utf-8"
        except UnicodeDecodeError:
            ctype = "application/octet-stream"
        if served.cut:
            data += f"\n[... cut at {len(served.data)} bytes ...]\n".encode()
        self._send(200, data, ctype, pages.RAW_CSP)


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class Viewer:
    """A running viewer: `url`, `close()`. Serves from a thread when started with `start()`."""

    def __init__(self, root: Path, port: int = 0, host: str = "127.0.0.1") -> None:
        if not _is_loopback(host):
            raise ViewerError(f"--host {host}: the viewer binds a loopback address only")
        root = Path(root).expanduser().resolve()
        if not root.is_dir():
            raise ViewerError(f"{root}: no such output root (a directory of runs)")
        handler: type[_Handler] = type("Handler", (_Handler,), {"store": Store(root), "port": 0})
        server_class = _Server6 if ":" in host else ThreadingHTTPServer
        try:
            self.httpd = server_class((host, port), handler)
        except OSError as exc:
            raise ViewerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        self.httpd.daemon_threads = True
        handler.port = self.httpd.server_address[1]
        self.root = root
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{handler.port}/"
        self._thread: threading.Thread | None = None

    def start(self) -> Viewer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="agentbench-view",
                                        daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def close(self) -> None:
        self.httpd.shutdown() if self._thread else None
        self.httpd.server_close()
