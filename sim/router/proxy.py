"""The stand-in router: a proxy that asks the EPP for endpoints and forwards as llm-d's gateway does.

For each completion the proxy finds the InferencePool serving the request's ``model``, asks the EPP
(``epp.decide``) for a decode pod and, when the P/D decider fires, a prefill pod, then forwards to the
decode pod's routing sidecar with ``x-gateway-destination-endpoint`` (and ``x-prefiller-host-port``).
The answer names the pods in ``x-lwsflow-served-by`` and each route is logged (``lwsflow.sim.router``)
and kept in ``Router.routes``.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lwsflow.sim import kinds
from lwsflow.sim.httpserver import QuietThreadingHTTPServer
from lwsflow.sim.router import epp, routes, wire
from lwsflow.sim.router.sidecar import RoutingSidecar
from lwsflow.sim.store import Store

log = logging.getLogger("lwsflow.sim.router")
_MODEL_KEYS = ("lwsflow.io/served-model", "lwsflow.io/model")


@dataclass(frozen=True)
class Route:
    """One routed request: which pool and pods served it (what the router logs)."""

    pool: str
    model: str
    tokens: int
    decode: epp.PoolEndpoint
    prefill: epp.PoolEndpoint | None
    status: int

    def line(self) -> str:
        p = self.prefill
        pre = f"{p.namespace}/{p.pod} ({p.host_port})" if p else "none"
        return (f"route pool={self.pool} model={self.model} ~{self.tokens} tokens: "
                f"decode {self.decode.namespace}/{self.decode.pod} ({self.decode.host_port}), prefill {pre} "
                f"-> {self.status}")


class Router:
    """Proxy + EPP + decode sidecars over one store; ``url`` once started, ``close()`` to stop."""

    def __init__(self, store: Store, *, non_cached_tokens: int = epp.DEFAULT_NON_CACHED_TOKENS,
                 timeout_s: float = 60.0, on_route: Callable[[Route], None] | None = None,
                 seed: int | None = None, port: int = 0) -> None:
        self.store = store
        self._rng = random.Random(seed)  # HTTPRoute weight draws and EPP ties (seeded: reproducible)
        self.non_cached_tokens = non_cached_tokens
        self.timeout_s = timeout_s
        self.on_route = on_route
        self.routes: deque[Route] = deque(maxlen=1000)
        self._sidecars: dict[tuple[str, int], RoutingSidecar] = {}
        self._lock = threading.Lock()
        self._httpd = QuietThreadingHTTPServer(("127.0.0.1", port), _Handler)  # 0: a free port
        self._httpd.router = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="router", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        with self._lock:
            sidecars, self._sidecars = list(self._sidecars.values()), {}
        for sc in sidecars:
            sc.stop()

    def __enter__(self) -> Router:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pools -------------------------------------------------------------------------------------------
    def pools(self) -> list[dict[str, Any]]:
        return self.store.list(kinds.INFERENCE_POOL.key)[0]

    def pool_for(self, model: str) -> tuple[dict[str, Any], list[epp.PoolEndpoint]] | None:
        """The pool for ``model``: among the pools whose pods serve it, drawn by HTTPRoute weight when
        a route lists them (``routes``), else the first; the only pool when none names the model."""
        candidates = []
        for pool in self.pools():
            members = epp.pool_endpoints(self.store, pool)
            if members:
                candidates.append((pool, members))
        serving = [(p, m) for p, m in candidates if model and model in self._models(p)]
        if not serving:
            return candidates[0] if len(candidates) == 1 else None
        by_key = {(p["metadata"].get("namespace", ""), p["metadata"]["name"]): (p, m) for p, m in serving}
        for backends in routes.weighted_rules(self.store):
            if any((b.namespace, b.pool) in by_key for b in backends):
                live = [b for b in backends if (b.namespace, b.pool) in by_key]
                chosen = routes.pick(live, self._rng)
                return by_key[(chosen.namespace, chosen.pool)] if chosen else None
        return serving[0]

    def _models(self, pool: dict[str, Any]) -> set[str]:
        ns = pool["metadata"].get("namespace", "")
        match = ((pool.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        sel = ",".join(f"{k}={v}" for k, v in sorted(match.items()))
        out: set[str] = set()
        for p in self.store.list(kinds.POD.key, ns, label_selector=sel)[0] if sel else []:
            meta = p["metadata"]
            for src in (meta.get("annotations") or {}, meta.get("labels") or {}):
                out.update(src[k] for k in _MODEL_KEYS if src.get(k))
        return out

    def sidecar(self, ep: epp.PoolEndpoint) -> RoutingSidecar:
        """The decode pod's sidecar, started on first use; starting one also stops the sidecars of
        pods no pool has any more (a rollout replaces pods, and their IPs, all the time)."""
        with self._lock:
            sc = self._sidecars.get((ep.ip, ep.port))
        if sc is not None:
            return sc
        live = {(m.ip, m.port) for p in self.pools() for m in epp.pool_endpoints(self.store, p)}
        with self._lock:
            stale = [self._sidecars.pop(k) for k in list(self._sidecars) if k not in live]
            sc = self._sidecars.get((ep.ip, ep.port))
            if sc is None:
                sc = self._sidecars[(ep.ip, ep.port)] = RoutingSidecar(ep.ip, ep.port, self.timeout_s)
        for old in stale:
            old.stop()
        return sc

    # -- one request ----------------------------------------------------------------------------------------
    def route(self, path: str, raw: bytes, headers: dict[str, str]) -> wire.Reply:
        try:
            body = json.loads(raw or b"null")
            if not isinstance(body, dict):
                raise ValueError("body must be a JSON object")
        except ValueError as exc:
            return _error(400, f"invalid JSON body: {exc}")
        model = str(body.get("model") or "")
        found = self.pool_for(model)
        if found is None:
            return _error(404, f"no InferencePool serves model {model!r} "
                               "(or its HTTPRoute weights are all 0)")
        pool, members = found
        # ties between equally loaded pods are drawn from the seeded source the weights use
        decision = epp.decide(members, body, self.non_cached_tokens, rng=self._rng)
        if decision is None:
            return _error(503, f"InferencePool {pool['metadata']['name']}: no decode endpoint answers")
        # a pod rendered with llm-d's sidecar has it on the pool's targetPort (the engine pod hook runs
        # it there); otherwise the router fronts the engine with a sidecar of its own on a free port
        sc_port = decision.decode.port if decision.decode.sidecar else self.sidecar(decision.decode).port
        headers[wire.DESTINATION_ENDPOINT] = f"{decision.decode.ip}:{sc_port}"
        if decision.prefill is not None:
            headers[wire.PREFILLER_HOST_PORT] = decision.prefill.host_port
        rep = wire.call("POST", decision.decode.ip, sc_port, path, raw, headers, self.timeout_s)
        d = decision.decode
        served = f"decode={d.namespace}/{d.pod}"
        served += f"; prefill={decision.prefill.namespace}/{decision.prefill.pod}" if decision.prefill else ""
        rep.headers[wire.SERVED_BY] = served
        rep.headers[wire.DECODE_ENDPOINT] = d.host_port
        if decision.prefill is not None:
            rep.headers[wire.PREFILL_ENDPOINT] = decision.prefill.host_port
        ns, name = pool["metadata"].get("namespace", ""), pool["metadata"]["name"]
        route = Route(f"{ns}/{name}", model, epp.estimated_tokens(body), d, decision.prefill, rep.status)
        self.routes.append(route)
        log.info("%s", route.line())
        if self.on_route is not None:
            self.on_route(route)
        return rep

    def forward_get(self, path: str, headers: dict[str, str]) -> wire.Reply:
        """GETs (``/v1/models``, ``/version``) go to any decode-capable member of the first pool."""
        for pool in self.pools():
            for ep in epp.pool_endpoints(self.store, pool):
                if ep.role in ("decode", "both"):
                    return wire.call("GET", ep.ip, ep.port, path, None, headers, self.timeout_s)
        return _error(503, "no InferencePool has a ready endpoint")


def _error(status: int, message: str) -> wire.Reply:
    body = {"error": {"message": message, "type": "RouterError", "param": None, "code": status}}
    return wire.Reply(status, {"content-type": "application/json"}, json.dumps(body).encode())


class _Handler(wire.RelayHandler):
    HEALTH = ("/health", "/healthz")

    def get(self, path: str, headers: dict[str, str]) -> wire.Reply:
        router: Router = self.server.router  # type: ignore[attr-defined]
        return router.forward_get(path, headers)

    def post(self, path: str, raw: bytes, headers: dict[str, str]) -> wire.Reply:
        router: Router = self.server.router  # type: ignore[attr-defined]
        return router.route(path, raw, headers)


def start_router(store: Store, **options: Any) -> Router:
    """Start the stand-in router for every InferencePool in ``store`` (see ``Router``)."""
    return Router(store, **options)
