"""Timeouts, retries and the total deadline are bounded; a warming pod is waited for, within limits."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from lwsflow.components.smoke import run_smoke
from lwsflow.components.smoke.client import CheckError, SmokeClient
from lwsflow.sim.engine import start_engine
from tests.smoke.smoke_helpers import MODEL, by_name, failed_names, fast_config


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Counting(BaseHTTPRequestHandler):
    """Answers 503 to everything and counts the attempts (a pod that never warms up)."""

    hits = 0

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        type(self).hits += 1
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_health_retries_are_bounded_by_warmup():
    _Counting.hits = 0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        t0 = time.monotonic()
        report = run_smoke(fast_config(urls=[f"http://127.0.0.1:{httpd.server_address[1]}"], warmup_s=0.4,
                                       backoff_s=0.05))
        elapsed = time.monotonic() - t0
    finally:
        httpd.shutdown()
        httpd.server_close()
    health = by_name(report)["health"][0]
    assert not health.passed and "HTTP 503" in health.detail and health.expected == "200"
    # backoff 0.05, 0.1, 0.2 fits in 0.4 s: 3-4 attempts, never an open-ended loop
    assert 2 <= _Counting.hits <= 5 and elapsed < 2
    assert failed_names(report) == {"health"}


def test_refused_connection_fails_fast_and_bounded():
    t0 = time.monotonic()
    report = run_smoke(fast_config(urls=[f"http://127.0.0.1:{_free_port()}"], warmup_s=0.3))
    assert failed_names(report) == {"health"} and time.monotonic() - t0 < 2
    assert "ConnectError" in by_name(report)["health"][0].detail


def test_warming_pod_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Connections are refused while 'weights load' (as vLLM does); the engine comes up only after
    the smoke's first /health was refused (an event, not a wall-clock delay: robust to load)."""
    port = _free_port()
    refused = threading.Event()
    real_request = SmokeClient.request

    def observed(self: SmokeClient, method: str, url: str, *args: Any, **kw: Any) -> Any:
        try:
            return real_request(self, method, url, *args, **kw)
        except CheckError:
            if url.endswith("/health"):
                refused.set()
            raise

    monkeypatch.setattr(SmokeClient, "request", observed)  # observes the real request, changes nothing
    started: list = []

    def warm_up() -> None:
        if refused.wait(30):
            started.append(start_engine(port=port, model=MODEL))

    thread = threading.Thread(target=warm_up)
    thread.start()
    try:
        report = run_smoke(fast_config(urls=[f"http://127.0.0.1:{port}"], warmup_s=30.0, backoff_s=0.05))
    finally:
        refused.set()
        thread.join()
        for h in started:
            h.stop()
    assert report.passed, report.failed()
    assert by_name(report)["health"][0].data["attempts"] >= 2


def test_total_deadline_stops_a_run_of_hanging_endpoints(engine):
    urls = [engine(modes="hang").url for _ in range(3)]
    t0 = time.monotonic()
    report = run_smoke(fast_config(urls=urls, request_timeout_s=0.5, deadline_s=1.5))
    elapsed = time.monotonic() - t0
    assert not report.passed and elapsed < 3.5, elapsed
    assert any("deadline" in c.detail for c in report.failed())


def test_trickling_stream_is_bounded_by_the_request_timeout(engine):
    """Tokens keep coming (each gap below the read timeout) but the stream as a whole is too slow."""
    h = engine(modes="slow-itl=0.3")
    t0 = time.monotonic()
    report = run_smoke(fast_config(urls=[h.url], request_timeout_s=0.5, max_tokens=8))
    assert {"completions-stream", "chat-stream"} <= failed_names(report)
    assert "within the request timeout" in by_name(report)["chat-stream"][0].detail
    assert time.monotonic() - t0 < 4
