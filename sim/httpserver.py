"""The threaded HTTP server under every loopback server lwsflow starts (embedded API, stand-in engine,
KV side channel): daemon handler threads, and a client that hangs up mid-request is routine, not a
traceback on stderr. Also the wire helpers they share: the request body (``read_body``), a whole answer
(``send_body``) or a chunked stream (``start_chunked``, ``write_chunk``, ``LAST_CHUNK``)."""

from __future__ import annotations

import io
import logging
import ssl
import sys
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO

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


# The zero-length chunk that ends a chunked (``Transfer-Encoding: chunked``) response body.
LAST_CHUNK = b"0\r\n\r\n"


def read_body(h: BaseHTTPRequestHandler) -> bytes:
    """The request body by Content-Length; none, 0 or negative is an empty body, never a read to EOF."""
    n = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(n) if n > 0 else b""


def send_body(
    h: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    """A complete answer with Content-Length: status line, headers and body in one write (one TCP
    segment for small answers, no Nagle/delayed-ACK stall between headers and body)."""
    h.send_response(status)
    h.send_header("Content-Type", content_type)
    h.send_header("Content-Length", str(len(data)))
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    if h.request_version == "HTTP/0.9":  # no status line nor headers were buffered: the body alone
        h.wfile.write(data)
        return
    h._headers_buffer.append(b"\r\n" + data)  # type: ignore[attr-defined]
    h.flush_headers()


def start_chunked(h: BaseHTTPRequestHandler, content_type: str, cache_control: str) -> None:
    """Status 200 and the headers of a streamed (chunked) answer; ``write_chunk`` sends the body."""
    h.send_response(200)
    h.send_header("Content-Type", content_type)
    h.send_header("Cache-Control", cache_control)
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()


def write_chunk(wfile: BinaryIO | io.BufferedIOBase, data: bytes) -> None:
    """One chunk of a chunked response body, flushed so the client sees it at once."""
    wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    wfile.flush()
