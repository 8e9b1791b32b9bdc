"""A failed stage check says why in its own words (issue 31.1): the smoke hook's line names every failed
check with its detail (the API server's 403, an engine's answer), bounded so the policy's 500-character
status.message keeps the stage's words too; the http check gives the status, its reason and the first
line of the body, or the transport error's text."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lwsflow.components.smoke.model import CheckResult, SmokeReport
from lwsflow.components.smoke.report import SUMMARY_LIMIT, failure_summary
from lwsflow.controller.rollout.hooks import http_probe, run_hook

FORBIDDEN = ('403 Forbidden: nodes is forbidden: User '
             '"system:serviceaccount:lwsflow-system:lwsflow-controller" '
             'cannot list resource "nodes" in API group "" at the cluster scope')
BODY = "HTTP 500: " + "an engine's long traceback " * 10


def test_smoke_summary_carries_each_failed_checks_words() -> None:
    rep = SmokeReport.build([
        CheckResult(name="discover", target="lws/big-405b", passed=True, detail="2 leader(s)"),
        CheckResult(name="placement", target="lws/big-405b", passed=False,
                    detail=f"cannot read node gpu-node-0: {FORBIDDEN}"),
        CheckResult(name="models", target="lws/big-405b pod big-405b-0", passed=False,
                    detail="/v1/models: model not listed", expected="llama", got="qwen"),
        CheckResult(name="chat", target="lws/big-405b pod big-405b-0", passed=False, detail=BODY),
        CheckResult(name="pd-decode", target="x", passed=False, skipped=True, detail="health failed"),
    ], 1.0)
    whole = (f"smoke failed: placement@lws/big-405b: cannot read node gpu-node-0: {FORBIDDEN}; "
             "models@lws/big-405b pod big-405b-0: /v1/models: model not listed (expected llama, got qwen); "
             f"chat@lws/big-405b pod big-405b-0: {BODY}")
    assert failure_summary(rep, limit=1000) == whole  # skipped and passed checks are not failures
    text = failure_summary(rep)
    assert text == whole[:SUMMARY_LIMIT - 1] + "…"
    assert len(text) == SUMMARY_LIMIT and FORBIDDEN in text  # the first failure whole, the rest cut


def test_smoke_summary_of_a_run_where_nothing_ran() -> None:
    assert failure_summary(SmokeReport.build([], 0.0)) == "smoke failed: no check ran"


def _server(status: int, body: bytes) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_a: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def test_http_check_detail_is_the_servers_answer() -> None:
    httpd = _server(503, b"Service Unavailable: TSDB not ready (WAL replay)\nmore\n")
    url = f"http://127.0.0.1:{httpd.server_address[1]}/-/ready"
    try:
        res = run_hook(http_probe(url, timeout_s=5), None)  # type: ignore[arg-type]
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert not res.ok
    assert res.detail == f"{url}: HTTP 503 Service Unavailable: Service Unavailable: TSDB not ready (WAL " \
                         "replay)"
    refused = run_hook(http_probe("http://127.0.0.1:9/-/ready", timeout_s=2), None)  # type: ignore[arg-type]
    assert not refused.ok and refused.detail.startswith("http://127.0.0.1:9/-/ready: ConnectError: ")
    assert len(refused.detail) > len("http://127.0.0.1:9/-/ready: ConnectError: ")  # the OS's words
