"""The stand-in engine's HTTP server: routing, auth, faults and the wire plumbing (JSON, SSE).

Protocol logic (what a completion returns, the P/D hand-off) lives in ``openai_api``; this module only
turns HTTP requests into calls on it and writes the answers, including the misbehaviour the failure
modes ask for (hangs, resets, garbage, cut streams).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler

from lwsflow.sim.engine import openai_api
from lwsflow.sim.engine.faults import Faults
from lwsflow.sim.httpserver import (
    LAST_CHUNK,
    QuietThreadingHTTPServer,
    read_body,
    send_body,
    start_chunked,
    write_chunk,
)

_HANG_MAX_S = 600.0  # a hung request ends at the latest when the engine stops or after this long
_POST_SCOPES = {"/v1/completions": "completions", "/v1/chat/completions": "chat"}


class EngineHTTPServer(QuietThreadingHTTPServer):
    """ThreadingHTTPServer that carries the engine; handler threads are daemons so stop never blocks."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], engine: openai_api.Engine) -> None:
        self.engine = engine
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Cut every open connection, as the end of a pod's process does: a keep-alive connection must
        not go on being served by a stopped engine (a replaced pod keeps its IP and port)."""
        with self._open_lock:
            conns, self._open = list(self._open), set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms delayed-ACK stall
    server: EngineHTTPServer

    def log_message(self, *args: object) -> None:  # tests run many requests; keep stderr quiet
        pass

    # -- routing ---------------------------------------------------------------------------------------
    def do_GET(self) -> None:
        eng = self.server.engine
        path = self.path.split("?", 1)[0]
        if path in ("/health", "/ping"):
            if self._fault("health"):
                return
            self._send(200, b"", "application/json")
        elif path == "/version":
            self._json(200, {"version": eng.version})
        elif path == "/v1/models":
            if self._guard() or self._fault("models"):
                return
            self._json(200, eng.models())
        elif path == "/metrics":
            if self._fault("metrics"):
                return
            if eng.faults.get("bad-metrics", "metrics"):
                self._send(200, b"vllm:num_requests_running{model_name=\"x\" 1\n# garbage {{{\n",
                           "text/plain; version=0.0.4")
                return
            self._send(200, eng.metrics.render(), "text/plain; version=0.0.4; charset=utf-8")
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        eng = self.server.engine
        path = self.path.split("?", 1)[0]
        if path in ("/health", "/ping"):
            self.do_GET()
            return
        scope = _POST_SCOPES.get(path)
        if scope is None:
            self._json(404, {"detail": "Not Found"})
            return
        if self._guard():
            return
        raw = read_body(self)
        try:
            body = json.loads(raw or b"null")
            if not isinstance(body, dict):
                raise ValueError("body must be a JSON object")
        except ValueError as exc:
            self._error(400, "BadRequestError", f"invalid JSON body: {exc}", scope)
            return
        stream = bool(body.get("stream"))
        # vLLM's serving layer rejects an unknown model before the engine core sees the request, so an
        # engine fault does not change that answer.
        if body.get("model") != eng.model:
            self._error(404, "NotFoundError", f"The model `{body.get('model')}` does not exist.", scope,
                        "model")
            return
        if self._fault(f"{scope}-stream" if stream else scope):
            return
        running = eng.metrics.running.labels(**eng.metrics.lv())
        running.inc()
        try:
            try:
                result = eng.generate(path, body, scope)
            except openai_api.EngineError as err:
                self._error(err.status, err.type, err.message, scope, err.param)
                return
            if stream:
                self._sse(eng.stream_events(result), scope)
            else:
                eng.pace_nonstream(result, scope)
                self._json(200, eng.response_body(result))
        finally:
            running.dec()

    # -- faults ------------------------------------------------------------------------------------------
    def _fault(self, scope: str) -> bool:
        """Apply the request-level faults for ``scope``; True when the request is already answered."""
        faults: Faults = self.server.engine.faults
        if faults.get("hang", scope):
            self.server.engine.stopped.wait(_HANG_MAX_S)
            self._drop()
            return True
        if faults.get("reset", scope):
            self._drop()
            return True
        if faults.get("garbage", scope):
            self._send(200, b"<html><body>502 upstream confused</body>", "application/json")
            return True
        if faults.get("status503", scope):
            self._error(503, "ServiceUnavailableError", "engine is not ready", scope)
            return True
        if faults.get("status500", scope):
            self._error(500, "InternalServerError", "EngineCore encountered an issue. See stack trace "
                        "(above) for the root cause.", scope)
            return True
        return False

    def _guard(self) -> bool:
        """vLLM's --api-key: only the /v1 prefix is guarded; True when the request was refused."""
        key = self.server.engine.api_key
        if key and self.headers.get("Authorization") != f"Bearer {key}":
            self._json(401, {"error": "Unauthorized"})
            return True
        return False

    # -- writing -------------------------------------------------------------------------------------------
    def _drop(self) -> None:
        """Close the connection without an answer (what a crashed worker looks like to a client)."""
        self.close_connection = True
        with contextlib.suppress(OSError):  # the peer may already be gone
            self.connection.shutdown(socket.SHUT_RDWR)

    def _error(self, status: int, etype: str, message: str, scope: str, param: str | None = None) -> None:
        eng = self.server.engine
        if eng.faults.get("bad-error-body", scope):
            self._send(status, f"Error: {message}".encode(), "text/plain")
            return
        self._json(status, openai_api.error_body(eng.error_style, status, etype, message, param))

    def _json(self, status: int, body: dict) -> None:
        self._send(status, json.dumps(body).encode(), "application/json")

    def _send(self, status: int, data: bytes, ctype: str) -> None:
        send_body(self, status, data, ctype)

    def _sse(self, events: Iterator[dict | str | None], scope: str) -> None:
        """Write SSE events with chunked transfer encoding; ``None`` from the iterator cuts the stream."""
        start_chunked(self, "text/event-stream", "no-cache")
        try:
            for ev in events:
                if ev is None:  # half-stream: the worker died mid-answer, no terminating chunk
                    self._drop()
                    return
                payload = ev if isinstance(ev, str) else json.dumps(ev)
                write_chunk(self.wfile, f"data: {payload}\n\n".encode())
            self.wfile.write(LAST_CHUNK)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up; nothing to answer
            self.close_connection = True


class EngineHandle:
    """A running stand-in engine: ``url``, ``stop()``; also a context manager."""

    def __init__(self, engine: openai_api.Engine, httpd: EngineHTTPServer,
                 ca_pem: bytes | None = None) -> None:
        self.engine = engine
        self._httpd = httpd
        self.ca_pem = ca_pem  # the self-signed certificate when serving HTTPS (its own CA)
        # the bound socket's address (server_address is typed for bytes hosts too; it is the same value)
        host, port = httpd.socket.getsockname()[:2]
        self.host: str = host
        self.port: int = port
        self.url = f"{'https' if ca_pem else 'http'}://{self.host}:{self.port}"
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"engine-{self.port}", daemon=True)
        self._thread.start()

    @property
    def role(self) -> str:
        return self.engine.role

    @property
    def model(self) -> str:
        return self.engine.model

    def stop(self) -> None:
        """Stop serving; hung requests are released and the side channel closes. Idempotent."""
        if self.engine.stopped.is_set():
            return
        self.engine.stopped.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.close_connections()
        self.engine.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> EngineHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_engine(host: str = "127.0.0.1", port: int = 0, role: str = "aggregated",
                 model: str = "stub-model", clock: Callable[[], float] | None = None,
                 **options: object) -> EngineHandle:
    """Start a stand-in engine in background threads; see ``openai_api.EngineOptions`` for options.
    ``clock`` measures uptime (profile slowdown); default the wall clock."""
    engine = openai_api.Engine(host=host, role=role, model=model,
                               options=openai_api.EngineOptions.model_validate(options),
                               clock=clock or time.monotonic)
    httpd = EngineHTTPServer((host, port), engine)
    ca_pem = None
    if engine.options.tls:
        from lwsflow.sim.apiserver.tls import self_signed

        identity = self_signed(host)
        # handshake lazily in the connection's own thread, not in the accept loop
        httpd.socket = identity.server_context().wrap_socket(httpd.socket, server_side=True,
                                                             do_handshake_on_connect=False)
        ca_pem = identity.cert_pem
    return EngineHandle(engine, httpd, ca_pem)
