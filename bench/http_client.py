"""CPU per HTTP request: ``httpx.get`` (a client per call) against ``httpclient.shared()`` (one
client, no keep-alive), side by side in one run against a local HTTP server, with ``http.client``
as the floor. Why lwsflow's short calls (hooks, Prometheus queries, webhooks, the stand-in engines'
KV side channel) go through the shared client: the per-call client builds a TLS context and loads
the CA bundle for every request, plain HTTP included.

    .venv/bin/python bench/http_client.py [--requests 200]

Prints one line per way: CPU milliseconds per request (client and server, one process), and the
ratio to the shared client.
"""

from __future__ import annotations

import argparse
import http.client
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from lwsflow.controller import httpclient


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def _cpu_ms(call: Callable[[], object], n: int) -> float:
    call()  # first use (imports, the shared client's construction) is not what is compared
    start = time.process_time()
    for _ in range(n):
        call()
    return (time.process_time() - start) / n * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=200)
    n = ap.parse_args().requests
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    url = f"http://127.0.0.1:{port}/"

    def plain() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/")
        conn.getresponse().read()
        conn.close()

    ways = {"httpx.get (a client per call)": lambda: httpx.get(url, timeout=5),
            "httpclient.shared().get": lambda: httpclient.shared().get(url, timeout=5),
            "http.client (floor)": plain}
    figures = {name: _cpu_ms(call, n) for name, call in ways.items()}
    server.shutdown()
    base = figures["httpclient.shared().get"]
    print(f"CPU per request over {n} GETs on loopback (client and server):")
    for name, ms in figures.items():
        print(f"  {name:32} {ms:6.2f} ms  ({ms / base:.1f}x the shared client)")


if __name__ == "__main__":
    main()
