"""Draining a blue-green side before its pods are deleted: wait until the requests it already took have
finished, not only a fixed time.

The route write that takes a pool's last traffic away stops new requests, not the ones in flight. A
fixed drain (``DRAIN_S`` cluster seconds) covers them on a real cluster, but cluster time may run
faster than the requests do (the embedded cluster's 30 s are 50 ms of wall time), and a long
generation may outlast it anywhere. So after the fixed drain the side's serving pods (the pods its
InferencePool selects, on the pool's target port) are asked what they still serve: the engines'
``vllm:num_requests_running`` / ``vllm:num_requests_waiting`` (SGLang: ``sglang:num_running_reqs`` /
``sglang:num_queue_reqs``) from ``/metrics``, until every one answers 0 or ``wall_limit_s`` of wall
time passed. A pod that does not answer (not reachable from where the rollout runs, or already gone)
is not waited for: the fixed drain is all it gets, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

from lwsflow.controller import httpclient
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import INFERENCE_POOL, POD

IN_FLIGHT = ("vllm:num_requests_running", "vllm:num_requests_waiting", "sglang:num_running_reqs",
             "sglang:num_queue_reqs")
WALL_LIMIT_S = 120.0  # the longest a drain waits for in-flight requests (wall seconds)


def in_flight(url: str, timeout_s: float = 2.0) -> float | None:
    """Requests an engine at ``url`` is running or queueing; None when it does not answer."""
    try:
        text = httpclient.shared().get(f"{url}/metrics", timeout=timeout_s).text
        families = list(text_string_to_metric_families(text))
    except (httpx.HTTPError, ValueError):
        return None
    return sum(s.value for f in families for s in f.samples if s.name in IN_FLIGHT)


def serving_urls(kube: Kube, namespace: str, pool: str) -> list[str]:
    """The engines behind ``pool``: its selected running pods' IPs on its first target port."""
    obj: Obj = kube.get(INFERENCE_POOL, namespace, pool)
    spec = obj.get("spec") or {}
    labels = ((spec.get("selector") or {}).get("matchLabels") or {})
    ports = spec.get("targetPorts") or []
    if not labels or not ports:
        return []
    port = ports[0].get("number")
    selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    pods, _ = kube.list(POD, namespace, label_selector=selector)
    running = [p.get("status") or {} for p in pods]
    return [f"http://{st['podIP']}:{port}" for st in running
            if st.get("podIP") and st.get("phase") == "Running"]


def wait_idle(urls: list[str], *, wall_limit_s: float = WALL_LIMIT_S, poll_s: float = 0.05,
              probe: Callable[[str], float | None] = in_flight) -> dict[str, float]:
    """Wait until no engine at ``urls`` has a request in flight (or the limit passed); what each still
    had at the end (empty: all idle or unreachable)."""
    end = time.monotonic() + wall_limit_s
    while True:
        busy = {u: n for u in urls if (n := probe(u)) is not None and n > 0}
        if not busy or time.monotonic() >= end:
            return busy
        time.sleep(poll_s)
