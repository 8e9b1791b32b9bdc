"""HTTPRoute weights split traffic between InferencePools (Gateway API backendRefs weight; llm-d's way
of moving traffic between the pools of two revisions). Observed shares are compared with the configured
weights within stated tolerances over seeded draws."""

from __future__ import annotations

import random
from collections import Counter

import httpx

from lwsflow.sim.router import Router, routes
from tests.router.router_helpers import MODEL, SELECTOR, SHORT_PROMPT, Pods

ROUTES = "httproutes.gateway.networking.k8s.io"
POOLS = "inferencepools.inference.networking.k8s.io"


def test_weighted_pick_matches_weights() -> None:
    rng = random.Random(7)
    backends = [routes.Backend("ns", "blue", 90), routes.Backend("ns", "green", 10),
                routes.Backend("ns", "off", 0)]
    n = 10_000
    got = Counter(routes.pick(backends, rng).pool for _ in range(n))  # type: ignore[union-attr]
    assert abs(got["blue"] / n - 0.9) < 0.02 and "off" not in got  # tolerance: 0.02 (~6 sigma)
    assert routes.pick([routes.Backend("ns", "x", 0)], rng) is None
    rule = {"backendRefs": [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "a"},
                            {"kind": "Service", "name": "svc", "weight": 5}]}
    assert routes.pool_backends(rule, "ns") == [routes.Backend("ns", "a", 1)]  # default weight 1


def _route(blue: int, green: int) -> dict:
    ref = {"group": "inference.networking.k8s.io", "kind": "InferencePool"}
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "chat", "namespace": "default"},
            "spec": {"parentRefs": [{"name": "gw"}],
                     "rules": [{"backendRefs": [{**ref, "name": "blue", "weight": blue},
                                                {**ref, "name": "green", "weight": green}]}]}}


def test_route_weights_split_and_shift_traffic(pods: Pods) -> None:
    for rev in ("blue", "green"):
        pods.start(f"{rev}-decode", "decode", labels={"rev": rev})
        pods.store.create(POOLS, {"metadata": {"name": rev, "namespace": "default"},
                                  "spec": {"selector": {"matchLabels": {**SELECTOR, "rev": rev}},
                                           "targetPorts": [{"number": pods.port}],
                                           "endpointPickerRef": {"name": "epp", "port": {"number": 9002}}}})
    pods.store.create(ROUTES, _route(80, 20))
    body = {"model": MODEL, "prompt": SHORT_PROMPT, "max_tokens": 1}
    with Router(pods.store, seed=3) as router, httpx.Client(timeout=30) as http:
        n = 100
        for _ in range(n):
            assert http.post(f"{router.url}/v1/completions", json=body).status_code == 200
        share = Counter(r.pool for r in router.routes)["default/blue"] / n
        assert abs(share - 0.8) <= 0.1, share  # tolerance: 0.1 over 100 seeded requests (2.5 sigma)
        served = {r.decode.pod for r in router.routes}
        assert served == {"blue-decode", "green-decode"}
        # shift every request to green, as the last stage of a blue-green move does
        pods.store.mutate(ROUTES, "default", "chat", lambda o: o.update(spec=_route(0, 100)["spec"]))
        router.routes.clear()
        for _ in range(20):
            assert http.post(f"{router.url}/v1/completions", json=body).status_code == 200
        assert {r.pool for r in router.routes} == {"default/green"}
        pods.store.mutate(ROUTES, "default", "chat", lambda o: o.update(spec=_route(0, 0)["spec"]))
        r = http.post(f"{router.url}/v1/completions", json=body)
        assert r.status_code == 404 and "weights are all 0" in r.text
