"""The controller's Prometheus metrics and its /metrics, /healthz and /readyz endpoints (127.0.0.1)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from lwsflow.controller.rollout.report import RolloutReport

_DURATIONS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)


class Metrics:
    """One registry per controller (tests run several in a process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.rollouts = Counter("lwsflow_rollouts_total", "Rollouts ended, by outcome", ["outcome"],
                                registry=r)
        self.stage = Gauge("lwsflow_rollout_current_stage", "Stage in progress (1-based; 0 when idle)",
                           ["namespace", "policy", "target"], registry=r)
        self.gate_wait = Histogram("lwsflow_gate_wait_seconds",
                                   "Cluster seconds from a stage's start to its gate passing", ["gate"],
                                   buckets=_DURATIONS, registry=r)
        self.bake = Histogram("lwsflow_bake_seconds", "Cluster seconds a stage baked",
                              buckets=_DURATIONS, registry=r)
        self.checks = Counter("lwsflow_check_results_total", "Stage checks, by result", ["result"],
                              registry=r)
        self.reconcile_errors = Counter("lwsflow_reconcile_errors_total", "Reconciles that failed",
                                        registry=r)
        self.reconcile_latency = Histogram("lwsflow_reconcile_duration_seconds",
                                           "Wall seconds one reconcile pass took", registry=r)
        self.leader = Gauge("lwsflow_leader", "1 while this replica holds the lease", registry=r)

    def forget(self, namespace: str, policy: str, target: str) -> None:
        """Drop a deleted policy's series (a scrape must not show a policy that is gone)."""
        with contextlib.suppress(KeyError):  # never set (e.g. an invalid policy)
            self.stage.remove(namespace, policy, target)

    def record_report(self, report: RolloutReport) -> None:
        """Gate-wait and bake figures of a finished rollout (checks are counted as they run)."""
        for s in report.stages:
            if s.started is not None and s.gate_passed is not None:
                self.gate_wait.labels(gate="stage").observe(max(0.0, s.gate_passed - s.started))
            if s.gate_passed is not None and s.ended is not None and s.result == "passed":
                self.bake.observe(max(0.0, s.ended - s.gate_passed))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Handler(BaseHTTPRequestHandler):
    metrics: Metrics
    ready: Callable[[], bool]
    healthy: Callable[[], bool]

    def do_GET(self) -> None:
        if self.path == "/metrics":
            self._send(200, self.metrics.render(), CONTENT_TYPE_LATEST)
        elif self.path == "/healthz":
            ok = self.healthy()
            self._send(200 if ok else 500, b"ok\n" if ok else b"unhealthy\n")
        elif self.path == "/readyz":
            ok = self.ready()
            self._send(200 if ok else 503, b"ok\n" if ok else b"not ready\n")
        else:
            self._send(404, b"not found\n")

    def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


class Endpoints:
    """A small HTTP server on 127.0.0.1 (port 0: any free port)."""

    def __init__(self, port: int, metrics: Metrics, *, ready: Callable[[], bool],
                 healthy: Callable[[], bool]) -> None:
        handler = type("Handler", (_Handler,), {"metrics": metrics, "ready": staticmethod(ready),
                                                "healthy": staticmethod(healthy)})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="endpoints", daemon=True)

    def start(self) -> Endpoints:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
