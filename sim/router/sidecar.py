"""The decode-side routing sidecar, as llm-d's runs in front of a decode pod's vLLM (nixlv2 connector).

Without ``x-prefiller-host-port`` the request goes to the local engine as is (prefill happens there).
With it: (1) the prompt goes to that prefill engine with ``stream: false``, ``stream_options`` removed,
``max_tokens`` (and ``max_completion_tokens``) 1 and ``kv_transfer_params {do_remote_decode: true,
do_remote_prefill: false, remote_*: null}``; a non-2xx prefill answer is returned as is; (2) the
original body plus the ``kv_transfer_params`` the prefill engine returned goes to the local engine,
which pulls the KV from ``remote_host:remote_port`` before decoding. The answer carries
``x-lwsflow-kv-source`` / ``x-lwsflow-kv-engine`` naming where that KV came from.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from typing import Any

from lwsflow.sim.httpserver import QuietThreadingHTTPServer
from lwsflow.sim.router import wire

log = logging.getLogger("lwsflow.sim.router")

PD_PATHS = ("/v1/completions", "/v1/chat/completions")
PREFILL_PARAMS: dict[str, Any] = {"do_remote_decode": True, "do_remote_prefill": False,
                                  "remote_engine_id": None, "remote_block_ids": None,
                                  "remote_host": None, "remote_port": None}


def prefill_body(body: dict[str, Any]) -> dict[str, Any]:
    """The prefill leg's body: the client's, one token, not streamed, asking to hold the KV."""
    out = {k: v for k, v in body.items() if k != "stream_options"}
    out["stream"] = False
    out["max_tokens"] = 1
    if "max_completion_tokens" in out:
        out["max_completion_tokens"] = 1
    out["kv_transfer_params"] = dict(PREFILL_PARAMS)
    return out


class RoutingSidecar:
    """One sidecar: listens on the decode pod's IP and fronts its engine; ``port`` 0 takes a free port
    (the router's own sidecars), else where the pod's rendered sidecar listens (the engine pod hook)."""

    def __init__(self, pod_ip: str, engine_port: int, timeout_s: float = 60.0, port: int = 0) -> None:
        self.engine = (pod_ip, engine_port)
        self.timeout_s = timeout_s
        self._httpd = QuietThreadingHTTPServer((pod_ip, port), _Handler)
        self._httpd.sidecar = self  # type: ignore[attr-defined]
        self.port: int = self._httpd.server_address[1]
        self.host_port = f"{pod_ip}:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"sidecar-{self.host_port}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def handle(self, path: str, raw: bytes, headers: dict[str, str]) -> wire.Reply:
        host, port = self.engine
        prefiller = headers.pop(wire.PREFILLER_HOST_PORT, "")
        headers.pop(wire.DESTINATION_ENDPOINT, None)
        headers.setdefault(wire.REQUEST_ID, str(uuid.uuid4()))
        if not prefiller or path not in PD_PATHS:
            return wire.call("POST", host, port, path, raw, headers, self.timeout_s)
        try:
            body = json.loads(raw or b"null")
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            return wire.call("POST", host, port, path, raw, headers, self.timeout_s)
        p_host, _, p_port = prefiller.split(",")[0].strip().rpartition(":")
        if not p_host or not p_port.isdigit():
            return wire.Reply(400, {"content-type": "application/json"},
                              b'{"error": {"message": "bad x-prefiller-host-port", "code": 400}}')
        pre = wire.call("POST", p_host, int(p_port), path, json.dumps(prefill_body(body)).encode(), headers,
                        self.timeout_s)
        if not 200 <= pre.status < 300:
            return pre
        try:
            params = json.loads(pre.body).get("kv_transfer_params")
        except (ValueError, AttributeError):
            params = None
        if not isinstance(params, dict):
            log.warning("prefill %s answered without kv_transfer_params", prefiller)
            return wire.call("POST", host, port, path, raw, headers, self.timeout_s)
        with_kv = json.dumps({**body, "kv_transfer_params": params}).encode()
        decode = wire.call("POST", host, port, path, with_kv, headers, self.timeout_s)
        decode.headers[wire.KV_SOURCE] = f"{params.get('remote_host')}:{params.get('remote_port')}"
        decode.headers[wire.KV_ENGINE] = str(params.get("remote_engine_id"))
        return decode


class _Handler(wire.RelayHandler):
    def get(self, path: str, headers: dict[str, str]) -> wire.Reply:
        sc: RoutingSidecar = self.server.sidecar  # type: ignore[attr-defined]
        return wire.call("GET", *sc.engine, path, None, headers, sc.timeout_s)

    def post(self, path: str, raw: bytes, headers: dict[str, str]) -> wire.Reply:
        sc: RoutingSidecar = self.server.sidecar  # type: ignore[attr-defined]
        return sc.handle(path, raw, headers)
