"""The HTTP plumbing the stand-in router and sidecar share: header names as llm-d writes them, and a
loopback POST/GET that returns status, headers and body (never raises for an HTTP error status)."""

from __future__ import annotations

import http.client
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from lwsflow.sim.httpserver import read_body, send_body

# llm-d (pkg/epp/metadata/consts.go, routing sidecar): the EPP's choice, read by proxy and sidecar
DESTINATION_ENDPOINT = "x-gateway-destination-endpoint"
PREFILLER_HOST_PORT = "x-prefiller-host-port"
REQUEST_ID = "x-request-id"
# lwsflow's own response headers: which pods served the request and where the KV came from
SERVED_BY = "x-lwsflow-served-by"
DECODE_ENDPOINT = "x-lwsflow-decode-endpoint"
PREFILL_ENDPOINT = "x-lwsflow-prefill-endpoint"
KV_SOURCE = "x-lwsflow-kv-source"  # set by the sidecar: remote_host:remote_port of the pulled KV
KV_ENGINE = "x-lwsflow-kv-engine"  # set by the sidecar: remote_engine_id of the pulled KV

# hop-by-hop and framing headers never copied from one leg to the next
_SKIP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host", "te",
                   "upgrade", "proxy-connection", "trailer"})


@dataclass
class Reply:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "application/json")


def forwardable(headers: Any) -> dict[str, str]:
    """The end-to-end headers of a request (``http.server`` message or mapping), lower-cased."""
    return {str(k).lower(): str(v) for k, v in headers.items() if str(k).lower() not in _SKIP}


def call(method: str, host: str, port: int, path: str, body: bytes | None, headers: dict[str, str],
         timeout_s: float) -> Reply:
    """One HTTP/1.1 exchange on loopback; a refused or dropped connection is a 502 reply."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        hdrs = dict(headers)
        if body is not None:
            hdrs["content-type"] = hdrs.get("content-type", "application/json")
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()  # a streamed (SSE) answer is buffered whole: see docs/llm-d.md
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
    except (OSError, http.client.HTTPException) as exc:
        msg = f'{{"error": {{"message": "upstream {host}:{port}: {type(exc).__name__}", "code": 502}}}}'
        return Reply(502, {"content-type": "application/json"}, msg.encode())
    finally:
        conn.close()


class RelayHandler(BaseHTTPRequestHandler):
    """The request side the proxy and the sidecar share: health on ``HEALTH`` paths, every other GET
    and POST handed to ``get``/``post`` with the forwardable headers, and the reply relayed with its
    ``x-`` headers (the served-by and KV headers llm-d writes)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    HEALTH: tuple[str, ...] = ("/health",)

    def log_message(self, *args: object) -> None:
        pass

    def get(self, path: str, headers: dict[str, str]) -> Reply:
        raise NotImplementedError

    def post(self, path: str, raw: bytes, headers: dict[str, str]) -> Reply:
        raise NotImplementedError

    def do_GET(self) -> None:
        if self.path in self.HEALTH:
            send_body(self, 200, b"", "application/json")
            return
        self._relay(self.get(self.path, forwardable(self.headers)))

    def do_POST(self) -> None:
        raw = read_body(self)
        self._relay(self.post(self.path.split("?", 1)[0], raw, forwardable(self.headers)))

    def _relay(self, rep: Reply) -> None:
        extra = {k: v for k, v in rep.headers.items() if k.startswith("x-")}
        send_body(self, rep.status, rep.body, rep.content_type, extra)
