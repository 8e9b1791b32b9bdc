"""The dashboard's HTTP server: pages, live updates as server-sent events, and the actions.

The standard library's threaded HTTP server (no new dependency): one local user, a handful of open
pages, each server-sent-event stream a thread that sleeps on the cache's condition (docs/architecture.md,
"The dashboard"). It binds 127.0.0.1 only, answers only requests addressed to that host and port
(a DNS-rebinding page cannot read the cluster through it), and runs an action only for a request
carrying htmx's ``HX-Request`` header from its own origin (a cross-site form cannot send that header
without a CORS preflight, which this server never grants).

Routes: ``/`` overview; ``/p/NS/NAME`` one rollout; ``/sse/...`` the same fragments as an event
stream (event ``update``); ``POST /p/NS/NAME/ACTION`` promote | pause | resume | abort | retry;
``/static/*`` and ``/vendor/*`` the shipped assets.
"""

from __future__ import annotations

import logging
import mimetypes
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from lwsflow.controller.errors import ApiError, InvalidInput, LwsflowError, OperationFailed
from lwsflow.dashboard import pages
from lwsflow.dashboard.cache import Cache

log = logging.getLogger("lwsflow.dashboard")
HERE = Path(__file__).parent
ASSETS = {"static": HERE / "static", "vendor": HERE / "vendor"}
KEEPALIVE_S = 15.0  # an SSE comment this often finds a closed page (a write fails)
MIN_GAP_S = 0.1  # at most ten updates a second per page: a burst of watch events is one render


class Dashboard:
    """The server over one cache. ``act(action, ns, name) -> str`` runs an action (raising the
    cluster's ApiError, e.g. Forbidden); ``now()`` is the cluster's time for ages."""

    def __init__(self, cache: Cache, act: Callable[[str, str, str], str], now: Callable[[], float],
                 port: int = 0, title: str = "") -> None:
        self.cache, self.act, self.now = cache, act, now
        self.renderer = pages.Renderer(cache, now, title=title)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/"
        self._thread: threading.Thread | None = None
        self.closing = threading.Event()

    def start(self) -> Dashboard:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="dashboard-http",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.closing.set()
        self.cache.stop()
        self.httpd.shutdown()
        self.httpd.server_close()

    def allowed_host(self, host: str) -> bool:
        return host in (f"127.0.0.1:{self.port}", f"localhost:{self.port}")


def _handler(dash: Dashboard) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "lwsflow-dashboard"

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s " + format, self.address_string(), *args)

        # -- plumbing ----------------------------------------------------------------------------------
        def _send(self, status: int, body: str | bytes, ctype: str = "text/html; charset=utf-8",
                  extra: dict[str, str] | None = None) -> None:
            data = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("X-Frame-Options", "DENY")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _path(self) -> list[str]:
            return [unquote(p) for p in urlsplit(self.path).path.split("/") if p]

        def _checked_host(self) -> bool:
            if dash.allowed_host(self.headers.get("Host", "")):
                return True
            self._send(HTTPStatus.FORBIDDEN, "this dashboard answers only 127.0.0.1", "text/plain")
            return False

        # -- GET ---------------------------------------------------------------------------------------
        def do_GET(self) -> None:
            if not self._checked_host():
                return
            parts = self._path()
            try:
                if parts[:1] in (["static"], ["vendor"]) and len(parts) == 2:
                    self._asset(parts[0], parts[1])
                elif parts[:1] == ["sse"]:
                    self._sse(parts[1:])
                elif parts[:1] == ["fragment"]:
                    self._send(200, self._fragment(parts[1:]))
                else:
                    self._send(200, self._page(parts))
            except pages.NotShown as exc:
                self._send(HTTPStatus.NOT_FOUND, dash.renderer.error_page(str(exc)))
            except (BrokenPipeError, ConnectionResetError):
                return
            except Exception as exc:  # a bug must show as a page, not a dropped connection
                log.exception("GET %s", self.path)
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR,
                           dash.renderer.error_page(f"internal error: {exc!r}"))

        def _page(self, parts: list[str]) -> str:
            if not parts:
                return dash.renderer.overview_page()
            if len(parts) == 3 and parts[0] == "p":
                return dash.renderer.rollout_page(parts[1], parts[2])
            raise pages.NotShown(f"no page at {'/'.join(parts)}")

        def _fragment(self, parts: list[str]) -> str:
            if parts == ["overview"]:
                return dash.renderer.overview_fragment()
            if len(parts) == 3 and parts[0] == "p":
                return dash.renderer.rollout_fragment(parts[1], parts[2])
            raise pages.NotShown(f"no view at {'/'.join(parts)}")

        def _asset(self, folder: str, name: str) -> None:
            path = ASSETS[folder] / name
            if "/" in name or name.startswith(".") or not path.is_file():
                raise pages.NotShown(f"no asset {folder}/{name}")
            ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
            self._send(200, path.read_bytes(), ctype, {"Cache-Control": "max-age=3600"})

        def _sse(self, parts: list[str]) -> None:
            """The view's fragment now and after every change of the cache that changes it."""
            self._fragment(parts)  # a 404 before the stream starts
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            seen, last, sent_at = -1, "", 0.0
            while not dash.closing.is_set():
                version = dash.cache.wait(seen, KEEPALIVE_S)
                if version == seen:
                    self.wfile.write(b": keepalive\n\n")
                    self.wfile.flush()
                    continue
                gap = MIN_GAP_S - (time.monotonic() - sent_at)
                if gap > 0:
                    time.sleep(gap)
                    version = dash.cache.version
                seen = version
                try:
                    html = self._fragment(parts)
                except pages.NotShown as exc:  # deleted while open
                    html = dash.renderer.error_fragment(str(exc))
                if html == last:
                    continue
                last, sent_at = html, time.monotonic()
                data = "".join(f"data: {line}\n" for line in html.split("\n"))
                self.wfile.write(f"event: update\n{data}\n".encode())
                self.wfile.flush()

        # -- POST: the actions -------------------------------------------------------------------------
        def do_POST(self) -> None:
            if not self._checked_host():
                return
            origin = self.headers.get("Origin")
            if self.headers.get("HX-Request") != "true" or (
                    origin is not None and not dash.allowed_host(urlsplit(origin).netloc)):
                self._send(HTTPStatus.FORBIDDEN, "actions come from the dashboard's own page", "text/plain")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(min(length, 65536))
            parts = self._path()
            if len(parts) != 4 or parts[0] != "p" or parts[3] not in pages.ACTIONS:
                self._send(HTTPStatus.NOT_FOUND, "no such action", "text/plain")
                return
            _p, ns, name, action = parts
            try:
                dash.renderer.policy(ns, name)  # in this dashboard's scope
                said, status, kind = dash.act(action, ns, name), 200, "ok"
            except pages.NotShown as exc:
                said, status, kind = str(exc), 404, "error"
            except ApiError as exc:  # the cluster said no: 403 Forbidden, 409 Conflict, ...
                said, status, kind = str(exc), exc.status, "error"
            except (InvalidInput, OperationFailed) as exc:  # e.g. promote while no gate holds the
                said, status, kind = str(exc), 409, "error"  # rollout; a retry that cannot restart it
            except LwsflowError as exc:
                said, status, kind = str(exc), 500, "error"
            self._send(status, dash.renderer.action_result(action, said, kind, status))

    return Handler
