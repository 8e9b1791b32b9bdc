"""Built-in analysis specs for vLLM and SGLang, under the metric names of
``shared/docs/smoke-reference.md`` (§3 vLLM 0.33, §5 SGLang 0.5): TTFT p95, ITL p95, request error
ratio, queue length, and for P/D the KV-transfer failures. Every metric compares the new revision with
the stable one over the same window, as Flagger and Kayenta do, so no absolute SLO has to be guessed.

Series are selected by the labels the file_sd targets carry (``components/prometheus.py``): namespace,
lws and revision.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SEL = 'namespace="{{namespace}}",lws="{{lws}}",revision="{{revision}}"'
_COMMON = {"interval": "30s", "count": 4, "failureLimit": 1, "inconclusiveLimit": 1}


def _p95(hist: str) -> str:
    return f"histogram_quantile(0.95, sum by (le) (rate({hist}_bucket{{{SEL}}}[{{{{window}}}}])))"


def _rate(counter: str, extra: str = "") -> str:
    return f"sum(rate({counter}{{{SEL}{extra}}}[{{{{window}}}}]))"


def _metric(name: str, query: str, compare: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "provider": {"prometheus": {"query": query}}, "compare": compare, **_COMMON}


def _spec(ttft: str, itl: str, errors: str, total: str, queue: str,
          kv_failed: str | None) -> dict[str, Any]:
    metrics = [
        _metric("ttft-p95", _p95(ttft), {"mode": "relative", "tolerance": 10}),
        _metric("itl-p95", _p95(itl), {"mode": "relative", "tolerance": 10}),
        # clamp_min: a window without requests gives 0/0 = NaN (inconclusive), never a division error
        _metric("error-ratio", f"{errors} / clamp_min({total}, 1e-9)",
                {"mode": "absolute", "tolerance": 0.005}),
        _metric("queue-length", f"max({queue}{{{SEL}}})", {"mode": "absolute", "tolerance": 4}),
    ]
    if kv_failed:
        metrics.append(_metric("kv-transfer-failures", _rate(kv_failed),
                               {"mode": "absolute", "tolerance": 0}))
    return {"metrics": metrics}


def vllm(pd: bool = False) -> dict[str, Any]:
    return _spec("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                 _rate("vllm:request_success_total", ',finished_reason=~"error|abort"'),
                 _rate("vllm:request_success_total"), "vllm:num_requests_waiting",
                 "vllm:nixl_num_failed_transfers_total" if pd else None)


def sglang(pd: bool = False) -> dict[str, Any]:
    return _spec("sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds",
                 _rate("sglang:num_aborted_requests_total"), _rate("sglang:num_requests_total"),
                 "sglang:num_queue_reqs", "sglang:num_transfer_failed_reqs_total" if pd else None)


TEMPLATES: dict[str, Callable[[], dict[str, Any]]] = {
    "vllm": vllm, "vllm-pd": lambda: vllm(pd=True), "sglang": sglang, "sglang-pd": lambda: sglang(pd=True)}
