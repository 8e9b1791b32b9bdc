"""Built-in analysis specs for vLLM and SGLang, under the metric names of
``shared/docs/smoke-reference.md`` (§3 vLLM 0.33, §5 SGLang 0.5): TTFT p95, ITL p95, request error
ratio, queue length, and for P/D the KV-transfer failures. Every metric compares the new revision with
the stable one over the same window, as Flagger and Kayenta do, so no absolute SLO has to be guessed;
latencies and ratios with one-sided tests on the counts (``stats.py``, alpha 0.01), decided
sequentially over the 4 looks (``evaluate.Look``): the analysis ends at the first decisive look.

Series are selected by the labels the file_sd targets carry (``components/prometheus.py``): namespace,
lws and revision.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SEL = 'namespace="{{namespace}}",lws="{{lws}}",revision="{{revision}}"'
_COMMON = {"interval": "30s", "count": 4, "failureLimit": 1, "inconclusiveLimit": 1}
# evidence accumulates over the analysis: counts since one window before it began ({{elapsed}}), so a
# 5% fault shows up with near certainty by the later measurements even when one window sees few events
_SINCE = "[{{elapsed}}]"


def _buckets(hist: str) -> str:
    return f"sum by (le) (increase({hist}_bucket{{{SEL}}}{_SINCE}))"


def _count(counter: str, extra: str = "") -> str:
    return f"sum(increase({counter}{{{SEL}{extra}}}{_SINCE}))"


def _metric(name: str, query: str, compare: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "provider": {"prometheus": {"query": query}}, "compare": compare, **_COMMON}


def _spec(ttft: str, itl: str, errors: str, total: str, queue: str,
          kv: tuple[str, str] | None) -> dict[str, Any]:
    # p95s: shares of requests above a bucket boundary, tested (stats.py), not interpolated quantiles
    metrics = [
        _metric("ttft-p95", _buckets(ttft), {"mode": "histogram", "quantile": 0.95, "tolerance": 10}),
        # ITL is observed per token and a request's tokens share its latency: the requests (those
        # with a first token) are the samples
        _metric("itl-p95", _buckets(itl), {"mode": "histogram", "quantile": 0.95, "tolerance": 10,
                                           "requests": _count(f"{ttft}_count")}),
        # half a point more errors allowed; above 5% a release fails whatever the stable's (the guard)
        _metric("error-ratio", errors, {"mode": "proportion", "total": total, "tolerance": 0.005,
                                        "maxRatio": 0.05}),
        _metric("queue-length", f"max({queue}{{{SEL}}})", {"mode": "absolute", "tolerance": 4}),
    ]
    if kv:
        # (failed transfers, transfers attempted): at most half a point above the stable's rate (a
        # tolerance of 0 can never be shown, so it would never pass), never above 5%
        metrics.append(_metric("kv-transfer-failures", kv[0],
                               {"mode": "proportion", "total": kv[1], "tolerance": 0.005,
                                "maxRatio": 0.05}))
    return {"metrics": metrics}


def vllm(pd: bool = False) -> dict[str, Any]:
    return _spec("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                 _count("vllm:request_success_total", ',finished_reason=~"error|abort"'),
                 _count("vllm:request_success_total"), "vllm:num_requests_waiting",
                 (_count("vllm:nixl_num_failed_transfers_total"),
                  # a successful transfer is timed, a failed one counted
                  f'{_count("vllm:nixl_xfer_time_seconds_count")} + '
                  f'{_count("vllm:nixl_num_failed_transfers_total")}') if pd else None)


def sglang(pd: bool = False) -> dict[str, Any]:
    return _spec("sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds",
                 _count("sglang:num_aborted_requests_total"), _count("sglang:num_requests_total"),
                 "sglang:num_queue_reqs",
                 # failed transfers among the requests served (SGLang exports no transfer total)
                 (_count("sglang:num_transfer_failed_reqs_total"), _count("sglang:num_requests_total"))
                 if pd else None)


TEMPLATES: dict[str, Callable[[], dict[str, Any]]] = {
    "vllm": vllm, "vllm-pd": lambda: vllm(pd=True), "sglang": sglang, "sglang-pd": lambda: sglang(pd=True)}
