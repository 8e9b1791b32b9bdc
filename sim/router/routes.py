"""HTTPRoute traffic split for the stand-in router: which InferencePool a request goes to.

The stand-in proxy plays the Gateway for every HTTPRoute in the cluster. A request for ``model`` is
served by the pools whose member pods serve that model; when an HTTPRoute rule lists one of them in
its ``backendRefs`` (kind InferencePool, group inference.networking.k8s.io), the proxy picks among that
rule's InferencePool backends in proportion to their ``weight`` (Gateway API: default 1, 0 = no
traffic), which is how llm-d shifts traffic between the pools of two revisions. Route matches
(paths, headers), parentRefs and cross-namespace references are not evaluated.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from lwsflow.sim import kinds
from lwsflow.sim.store import Store

POOL_GROUP = "inference.networking.k8s.io"


@dataclass(frozen=True)
class Backend:
    namespace: str
    pool: str
    weight: int


def pool_backends(rule: dict[str, Any], namespace: str) -> list[Backend]:
    """The InferencePool backends of one HTTPRoute rule (Gateway API default weight 1)."""
    out = []
    for ref in rule.get("backendRefs") or []:
        if ref.get("kind") == "InferencePool" and ref.get("group") == POOL_GROUP:
            out.append(Backend(ref.get("namespace") or namespace, ref["name"], int(ref.get("weight", 1))))
    return out


def weighted_rules(store: Store) -> list[list[Backend]]:
    """Every HTTPRoute rule that sends traffic to InferencePools, as its backend list."""
    rules = []
    for route in store.list(kinds.HTTP_ROUTE.key)[0]:
        ns = route["metadata"].get("namespace", "")
        for rule in (route.get("spec") or {}).get("rules") or []:
            backends = pool_backends(rule, ns)
            if backends:
                rules.append(backends)
    return rules


def pick(backends: list[Backend], rng: random.Random) -> Backend | None:
    """One backend drawn in proportion to weight; None when every weight is 0."""
    total = sum(b.weight for b in backends if b.weight > 0)
    if total <= 0:
        return None
    x = rng.uniform(0, total)
    for b in backends:
        if b.weight <= 0:
            continue
        x -= b.weight
        if x <= 0:
            return b
    return next(b for b in reversed(backends) if b.weight > 0)
