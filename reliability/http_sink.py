"""A local HTTP endpoint the tests point checks and webhooks at: it answers 200 and records each POST."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the default backlog of 5 drops connections when checks and hooks burst
    daemon_threads = True


class Sink:
    """A local HTTP endpoint answering 200: the http check's URL and the webhook's."""

    def __init__(self) -> None:
        self.posts: list[bytes] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def _ok(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def do_GET(self) -> None:
                self._ok()

            def do_POST(self) -> None:
                sink.posts.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self._ok()

            def log_message(self, *_a: Any) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
