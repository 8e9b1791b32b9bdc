"""The stand-in engine's Prometheus metrics, under the vLLM 0.33 names the smoke test reads.

Each engine owns a private ``CollectorRegistry`` (several engines share one test process). Labels are
vLLM's ``model_name`` and ``engine`` (engine index, "0" here).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                    7.5, 10.0, 20.0, 40.0, 80.0)
SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")


class EngineMetrics:
    """Counters, gauges and histograms of one engine; ``render()`` gives the /metrics body."""

    def __init__(self, model: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ["model_name", "engine"]
        self._lv = {"model_name": model, "engine": "0"}
        r = self.registry
        self.running = Gauge("vllm:num_requests_running", "Requests in model execution batches.",
                             labels, registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "Requests waiting to be processed.",
                             labels, registry=r)
        self.kv_usage = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage (1 = 100%).", labels, registry=r)
        self.success = Counter("vllm:request_success", "Finished requests.", [*labels, "finished_reason"],
                               registry=r)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prefill tokens processed.", labels, registry=r)
        self.generation_tokens = Counter("vllm:generation_tokens", "Generation tokens processed.", labels,
                                         registry=r)
        self.prompt_by_source = Counter("vllm:prompt_tokens_by_source",
                                        "Prompt tokens by source.", [*labels, "source"], registry=r)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Time to first token.", labels,
                              buckets=_LATENCY_BUCKETS, registry=r)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "Inter-token latency.", labels,
                             buckets=_LATENCY_BUCKETS, registry=r)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency.", labels,
                             buckets=_LATENCY_BUCKETS, registry=r)
        self.nixl_xfer = Histogram("vllm:nixl_xfer_time_seconds", "NIXL KV transfer time.", labels,
                                   buckets=_LATENCY_BUCKETS, registry=r)
        self.nixl_failed = Counter("vllm:nixl_num_failed_transfers", "Failed NIXL transfers.", labels,
                                   registry=r)
        self.nixl_failed_notif = Counter("vllm:nixl_num_failed_notifications",
                                         "Failed NIXL notifications.", labels, registry=r)
        self.nixl_expired = Counter("vllm:nixl_num_kv_expired_reqs",
                                    "Requests whose KV lease expired before decode pulled it.", labels,
                                    registry=r)
        # Touch every labelled child so the series exist at zero, as in vLLM (a gate can read a delta).
        for m in (self.running, self.waiting, self.kv_usage, self.prompt_tokens, self.generation_tokens,
                  self.ttft, self.itl, self.e2e, self.nixl_xfer, self.nixl_failed, self.nixl_failed_notif,
                  self.nixl_expired):
            m.labels(**self._lv)
        for reason in ("stop", "length", "abort", "error"):
            self.success.labels(**self._lv, finished_reason=reason)
        for src in SOURCES:
            self.prompt_by_source.labels(**self._lv, source=src)

    def lv(self, **extra: str) -> dict[str, str]:
        return {**self._lv, **extra}

    def finished(self, reason: str, prompt: int, generated: int, external: int = 0) -> None:
        """Count one finished request; ``external`` prompt tokens came over KV transfer, not compute."""
        external = min(external, prompt)
        self.success.labels(**self.lv(finished_reason=reason)).inc()
        self.prompt_tokens.labels(**self._lv).inc(prompt)
        self.generation_tokens.labels(**self._lv).inc(generated)
        self.prompt_by_source.labels(**self.lv(source="local_compute")).inc(prompt - external)
        self.prompt_by_source.labels(**self.lv(source="external_kv_transfer")).inc(external)

    def render(self) -> bytes:
        return generate_latest(self.registry)
