"""Shared fixtures for the router tests: a store with pods backed by real stand-in engines on 127.0.0.1."""

from __future__ import annotations

from typing import Any

from lwsflow.sim import kinds
from lwsflow.sim.engine import EngineHandle, start_engine
from lwsflow.sim.store import Store

MODEL = "router-model"
SELECTOR = {"app": "pd-pool"}
LONG_PROMPT = "Tell me about leader worker sets and disaggregated serving. " * 20  # ~300 tokens
SHORT_PROMPT = "hi"  # 0 tokens by chars/4


def pool(port: int, name: str = "pool", namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": dict(SELECTOR)}, "targetPorts": [{"number": port}],
                     "endpointPickerRef": {"name": "epp", "port": {"number": 9002}}}}


def add_pod(store: Store, name: str, role: str, ip: str, *, phase: str = "Running",
            labels: dict[str, str] | None = None) -> None:
    store.create(kinds.POD.key, {
        "metadata": {"name": name, "namespace": "default",
                     "labels": {**SELECTOR, "llm-d.ai/role": role, **(labels or {})},
                     "annotations": {"lwsflow.io/served-model": MODEL}},
        "spec": {"containers": [{"name": "engine", "image": "vllm"}]},
        "status": {"phase": phase, "podIP": ip}})


class Pods:
    """Stand-in engines, each on its own loopback IP (127.0.0.N) and one shared port, like pod IPs."""

    def __init__(self, store: Store, base: int) -> None:
        self.store = store
        self.port = 0
        self.engines: dict[str, EngineHandle] = {}
        self._next = base

    def start(self, name: str, role: str, labels: dict[str, str] | None = None, **kw: Any) -> EngineHandle:
        ip = f"127.0.{self._next // 250}.{self._next % 250 + 2}"
        self._next += 1
        h = start_engine(host=ip, port=self.port, role=role, model=MODEL, side_channel_port=0, **kw)
        self.port = h.port  # the next pods listen on the same port, as a pool's targetPort says
        self.engines[name] = h
        add_pod(self.store, name, role, ip, labels=labels)
        return h

    def close(self) -> None:
        for h in self.engines.values():
            h.stop()


class Recorder:
    """A loopback HTTP hop that records every request (path, headers, JSON body) and forwards it."""

    def __init__(self, ip: str, port: int, target: tuple[str, int]) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler

        from lwsflow.sim.httpserver import QuietThreadingHTTPServer, read_body, send_body
        from lwsflow.sim.router import wire

        self.seen: list[tuple[str, dict[str, str], Any]] = []
        rec = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                pass

            def _go(self, method: str) -> None:
                import json

                raw = read_body(self) if method == "POST" else None
                hdrs = wire.forwardable(self.headers)
                if method == "POST":
                    rec.seen.append((self.path, hdrs, json.loads(raw or b"null")))
                rep = wire.call(method, *target, self.path, raw, hdrs, 30)
                send_body(self, rep.status, rep.body, rep.content_type)

            def do_GET(self) -> None:
                self._go("GET")

            def do_POST(self) -> None:
                self._go("POST")

        self._httpd = QuietThreadingHTTPServer((ip, port), H)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
