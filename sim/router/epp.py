"""The stand-in endpoint picker (EPP): pool membership, load scraping, decode choice, P/D decision.

* Membership, as the Gateway API Inference Extension defines an ``InferencePool``: pods in the pool's
  namespace matching ``spec.selector.matchLabels``, Running with a pod IP, served on
  ``spec.targetPorts[0].number``. The role comes from llm-d's ``llm-d.ai/role`` label, else lwsflow's
  ``lwsflow.io/role`` or the DisaggregatedSet role label; pods without a role serve both (aggregated).
* Decode choice: llm-d's default scorers weigh queue depth and KV-cache use, both scraped from the
  engines' ``/metrics`` (``vllm:num_requests_waiting`` + ``vllm:num_requests_running``,
  ``vllm:kv_cache_usage_perc``); the stand-in takes the least-loaded pod by (queue, KV use), ties
  drawn at random as llm-d's max-score picker does (by name without a random source).
* P/D decision: llm-d's ``prefix-based-pd-decider`` disaggregates when the estimated uncached prompt
  (characters / 4) is at least ``nonCachedTokens``; 0 turns P/D off. No prefix cache is modelled, so
  the whole prompt counts as uncached.
"""

from __future__ import annotations

import http.client
import json
import random
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from lwsflow.controller.api.serving import routing_sidecar_ports
from lwsflow.sim import kinds
from lwsflow.sim.store import Store

LLMD_ROLE = "llm-d.ai/role"
ROLE_LABELS = (LLMD_ROLE, "lwsflow.io/role", "disaggregatedset.x-k8s.io/role")
# llm-d's P/D guide EndpointPickerConfig sets nonCachedTokens: 16 (the plugin's own default 0 = P/D off)
DEFAULT_NON_CACHED_TOKENS = 16
CHARS_PER_TOKEN = 4
QUEUE_METRICS = ("vllm:num_requests_waiting", "vllm:num_requests_running")
KV_METRICS = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # 0.33 name, then the older one


@dataclass(frozen=True)
class PoolEndpoint:
    """One member of an InferencePool: a pod and the address its engine serves on."""

    namespace: str
    pod: str
    ip: str
    port: int
    role: str  # prefill | decode | both
    sidecar: bool = False  # the pod's own routing sidecar listens on ``port`` (rendered with ``llmd``)

    @property
    def host_port(self) -> str:
        return f"{self.ip}:{self.port}"


@dataclass(frozen=True)
class Load:
    queue: float  # waiting + running requests
    kv_usage: float  # 0..1


def _role(labels: dict[str, str]) -> str:
    for key in ROLE_LABELS:
        value = labels.get(key)
        if value in ("prefill", "decode"):
            return value
    return "both"


def pool_endpoints(store: Store, pool: dict[str, Any]) -> list[PoolEndpoint]:
    """The pool's member pods, sorted by name (only Running pods with an IP can be picked)."""
    meta, spec = pool.get("metadata") or {}, pool.get("spec") or {}
    ns = meta.get("namespace", "")
    match = (spec.get("selector") or {}).get("matchLabels") or {}
    ports = spec.get("targetPorts") or []
    if not match or not ports:
        return []
    selector = ",".join(f"{k}={v}" for k, v in sorted(match.items()))
    pods, _ = store.list(kinds.POD.key, ns, label_selector=selector)
    out = []
    for p in pods:
        status = p.get("status") or {}
        gone = p["metadata"].get("deletionTimestamp")
        if status.get("phase") != "Running" or not status.get("podIP") or gone:
            continue
        port = int(ports[0]["number"])
        own = routing_sidecar_ports(p.get("spec") or {})
        out.append(PoolEndpoint(ns, p["metadata"]["name"], status["podIP"], port,
                                _role(p["metadata"].get("labels") or {}), own is not None and own[0] == port))
    return out


_LOAD_SERIES = frozenset((*QUEUE_METRICS, *KV_METRICS))


def parse_load(metrics_text: str) -> Load:
    """Queue length and KV-cache use from a vLLM ``/metrics`` body (absent series count as 0)."""
    # Only the few series read below go to the parser: an engine's /metrics holds hundreds of
    # histogram lines, and parsing them all for every routed request was most of the router's CPU.
    wanted = [line for line in metrics_text.splitlines()
              if line and line[0] != "#" and line.partition("{")[0].partition(" ")[0] in _LOAD_SERIES]
    values: dict[str, float] = {}
    for fam in text_string_to_metric_families("\n".join(wanted) + "\n"):
        for s in fam.samples:
            values[s.name] = values.get(s.name, 0.0) + float(s.value)
    queue = sum(values.get(n, 0.0) for n in QUEUE_METRICS)
    kv = next((values[n] for n in KV_METRICS if n in values), 0.0)
    return Load(queue, kv)


def scrape_load(ep: PoolEndpoint, timeout_s: float = 2.0) -> Load | None:
    """The endpoint's load, or None when its /metrics cannot be read (the pod is then not picked)."""
    conn = http.client.HTTPConnection(ep.ip, ep.port, timeout=timeout_s)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        body = resp.read().decode("utf-8", "replace")
        return parse_load(body) if resp.status == 200 else None
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def least_loaded(loads: dict[PoolEndpoint, Load], rng: random.Random | None = None) -> PoolEndpoint | None:
    """The endpoint with the shortest queue, then the lowest KV-cache use; among equals a random one
    when ``rng`` is given (llm-d's max-score picker shuffles ties, so idle pods share the traffic),
    else the first by name."""
    if not loads:
        return None
    best = min((loads[ep].queue, loads[ep].kv_usage) for ep in loads)
    tied = sorted((ep for ep in loads if (loads[ep].queue, loads[ep].kv_usage) == best), key=lambda e: e.pod)
    return rng.choice(tied) if rng is not None else tied[0]


def estimated_tokens(body: dict[str, Any]) -> int:
    """Prompt tokens as llm-d's decider estimates them: characters / 4 (chat: every message's content)."""
    prompt = body.get("prompt")
    if prompt is None and isinstance(body.get("messages"), list):
        prompt = "".join(str(m.get("content") or "") for m in body["messages"] if isinstance(m, dict))
    if isinstance(prompt, list):
        prompt = "".join(str(p) for p in prompt)
    return len(str(prompt or "")) // CHARS_PER_TOKEN


def should_disaggregate(body: dict[str, Any], non_cached_tokens: int) -> bool:
    """The prefix-based P/D decider: uncached prompt tokens >= the threshold (0 disables P/D)."""
    return non_cached_tokens > 0 and estimated_tokens(body) >= non_cached_tokens


@dataclass(frozen=True)
class Decision:
    decode: PoolEndpoint
    prefill: PoolEndpoint | None
    loads: dict[PoolEndpoint, Load]


def decide(endpoints: list[PoolEndpoint], body: dict[str, Any], non_cached_tokens: int,
           scrape: Any = scrape_load, rng: random.Random | None = None) -> Decision | None:
    """Pick a decode pod by load and, when the decider fires and a prefill pod answers, a prefill pod."""
    decoders = {ep: ld for ep in endpoints
                if ep.role in ("decode", "both") and (ld := scrape(ep)) is not None}
    decode = least_loaded(decoders, rng)
    if decode is None:
        return None
    prefill = None
    if should_disaggregate(body, non_cached_tokens):
        prefillers = {ep: ld for ep in endpoints if ep.role == "prefill" and (ld := scrape(ep)) is not None}
        prefill = least_loaded(prefillers, rng)
    return Decision(decode, prefill, {**decoders})


def dumps(obj: Any) -> bytes:
    return json.dumps(obj).encode()
