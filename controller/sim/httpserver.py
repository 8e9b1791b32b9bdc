"""The threaded HTTP server under every loopback server lwsflow starts (embedded API, stand-in engine,
KV side channel): daemon handler threads, and a client that hangs up mid-request is routine, not a
traceback on stderr."""

from __future__ import annotations

import logging
import ssl
import sys
from http.server import ThreadingHTTPServer
from typing import Any

log = logging.getLogger("lwsflow.sim.http")

# What a client going away looks like from the server side.
CLIENT_GONE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError, TimeoutError, ssl.SSLError)


class QuietThreadingHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, CLIENT_GONE):
            return
        log.warning("request from %s failed: %s: %s", client_address, type(exc).__name__, exc)
