"""The P/D hand-off check, as vLLM's NIXL connector and the llm-d sidecar run it (reference §4.1).

1. ``pd-prefill``: POST the prefill engine with ``max_tokens: 1``, ``stream: false`` and
   ``kv_transfer_params {do_remote_decode: true, ...}``; the reply must carry filled transfer params
   (engine id, block ids, host, port, request id).
2. ``pd-decode``: POST the decode engine with the original body plus those params; it must answer a
   valid completion (vLLM's default ``kv_load_failure_policy=fail`` turns a failed pull into an error).
3. ``pd-metrics``: on the decode engine, ``vllm:prompt_tokens_by_source_total{source=
   "external_kv_transfer"}`` must have risen and ``vllm:nixl_num_failed_transfers_total`` must not:
   with ``recompute`` the completion succeeds although the KV never arrived, and only this shows it.

Through a gateway (``gateway-pd``) the router decides whether to disaggregate from the *uncached*
prompt length, so the prompt is long and starts with a random per-run prefix (reference §4.2).
"""

from __future__ import annotations

from typing import Any

from lwsflow.components.smoke import scrape, shapes
from lwsflow.components.smoke.checks import Outcome, skipped, timed
from lwsflow.components.smoke.client import CheckError, SmokeClient
from lwsflow.components.smoke.model import CheckResult, Endpoint, SmokeConfig

REQUIRED_PARAMS = ("remote_engine_id", "remote_block_ids", "remote_host", "remote_port", "remote_request_id")
_PREFILL_PARAMS = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                   "remote_block_ids": None, "remote_host": None, "remote_port": None}


def _scrape(http: SmokeClient, url: str) -> scrape.Scrape:
    resp = http.request("GET", f"{url.rstrip('/')}/metrics")
    if resp.status_code != 200:
        raise CheckError(f"{url}/metrics: HTTP {resp.status_code}", expected="200", got=str(resp.status_code))
    try:
        return scrape.parse(resp.text)
    except scrape.MetricsError as exc:
        raise CheckError(f"{url}/metrics: {exc}") from exc


def _kv_counters(s: scrape.Scrape) -> tuple[float | None, float]:
    external = s.total(scrape.EXTERNAL_KV, source="external_kv_transfer")
    failed = sum(s.total(n) or 0.0 for n in scrape.FAILED_TRANSFERS)
    return external, failed


def handoff(prefill: Endpoint, decode: Endpoint, target: str, cfg: SmokeConfig, http: SmokeClient,
            prompt: str) -> list[CheckResult]:
    """The three P/D checks for one prefill/decode pair."""
    model = decode.model or prefill.model or cfg.model
    state: dict[str, Any] = {}
    out: list[CheckResult] = []

    def prefill_step() -> Outcome:
        try:
            state["before"] = _kv_counters(_scrape(http, decode.url))
        except CheckError:
            state["before"] = None  # pd-metrics reports it; the hand-off itself can still be tried
        body = {"model": model, "prompt": prompt, "max_tokens": 1, "stream": False,
                "kv_transfer_params": dict(_PREFILL_PARAMS)}
        status, reply = http.json("POST", f"{prefill.url.rstrip('/')}/v1/completions", body)
        if status != 200:
            form = shapes.error_form(reply)
            raise CheckError(f"prefill: HTTP {status}: {form[1] if form else str(reply)[:120]}",
                             expected="200", got=str(status))
        params = reply.get("kv_transfer_params") if isinstance(reply, dict) else None
        if not isinstance(params, dict):
            raise CheckError("prefill reply has no kv_transfer_params", expected="kv_transfer_params",
                             got=repr(params))
        missing = [k for k in REQUIRED_PARAMS if params.get(k) in (None, "", [])]
        if missing or not isinstance(params.get("remote_block_ids"), list):
            raise CheckError(f"prefill kv_transfer_params lacks {', '.join(missing) or 'block id list'}",
                             expected=", ".join(REQUIRED_PARAMS), got=", ".join(sorted(params)))
        state["params"] = params
        return (f"engine {str(params['remote_engine_id'])[:8]}, {len(params['remote_block_ids'])} block(s) "
                f"at {params['remote_host']}:{params['remote_port']}",
                {"kv_transfer_params": {k: params[k] for k in REQUIRED_PARAMS}})

    def decode_step() -> Outcome:
        body = {"model": model, "prompt": prompt, "max_tokens": cfg.max_tokens, "temperature": 0,
                "kv_transfer_params": state["params"]}
        status, reply = http.json("POST", f"{decode.url.rstrip('/')}/v1/completions", body)
        if status != 200:
            form = shapes.error_form(reply)
            raise CheckError(f"decode: HTTP {status}: {form[1] if form else str(reply)[:160]}",
                             expected="200", got=str(status))
        problems = shapes.completion_problems(reply, model or "", False, cfg.max_tokens)
        if problems:
            raise CheckError("decode: " + "; ".join(problems), got=problems[0])
        return f"{reply['usage']['completion_tokens']} tokens from decode", {}

    def metrics_step() -> Outcome:
        before = state.get("before")
        if before is None:
            raise CheckError("decode /metrics could not be read before the hand-off")
        after = _kv_counters(_scrape(http, decode.url))
        if after[0] is None:
            raise CheckError(f"decode exposes no {scrape.EXTERNAL_KV}{{source=external_kv_transfer}}",
                             expected="the series", got="absent")
        ext_delta = after[0] - (before[0] or 0.0)
        failed_delta = after[1] - before[1]
        if failed_delta > 0:
            raise CheckError(f"failed KV transfers rose by {failed_delta:g}", expected="+0",
                             got=f"+{failed_delta:g}")
        if ext_delta <= 0:
            raise CheckError("external_kv_transfer prompt tokens did not rise: decode recomputed the prompt",
                             expected="> 0", got=f"+{ext_delta:g}")
        return f"external_kv_transfer +{ext_delta:g} tokens, failed transfers +0", \
            {"external_kv_tokens": ext_delta}

    res = timed("pd-prefill", target, prefill_step)
    out.append(res)
    if not res.passed:
        out += [skipped("pd-decode", target, "pd-prefill failed"), skipped("pd-metrics", target,
                                                                           "pd-prefill failed")]
        return out
    res = timed("pd-decode", target, decode_step)
    out.append(res)
    out.append(timed("pd-metrics", target, metrics_step))
    return out


# Response headers lwsflow's stand-in router and sidecar add (docs/llm-d.md); a real gateway may lack them.
DECODE_ENDPOINT = "x-lwsflow-decode-endpoint"
PREFILL_ENDPOINT = "x-lwsflow-prefill-endpoint"
KV_SOURCE = "x-lwsflow-kv-source"
SERVED_BY = "x-lwsflow-served-by"


def _routed(headers: Any) -> tuple[str, str, str, str]:
    """(served-by, decode host:port, prefill host:port, KV source host:port) from the router's headers."""
    def get(name: str) -> str:
        return str(headers.get(name) or "")

    return get(SERVED_BY), get(DECODE_ENDPOINT), get(PREFILL_ENDPOINT), get(KV_SOURCE)


def gateway_pd(gateway: Endpoint, decodes: list[Endpoint], cfg: SmokeConfig, http: SmokeClient,
               prompt: str) -> CheckResult:
    """A completion through the gateway; when decode pods are known, their external KV must rise.

    When the gateway names the pods it chose (lwsflow's stand-in router), the check also proves the KV
    the decode pod loaded came from the prefill pod the EPP chose, and that the named decode pod's
    external KV counter rose (scraped before and after when it is among the known decode pods)."""
    model = gateway.model or cfg.model

    def step() -> Outcome:
        before = [_kv_counters(_scrape(http, d.url)) for d in decodes]
        body = {"model": model, "prompt": prompt, "max_tokens": cfg.max_tokens, "temperature": 0}
        resp = http.request("POST", f"{gateway.url.rstrip('/')}/v1/completions", body)
        try:
            status, reply = resp.status_code, resp.json()
        except ValueError as exc:
            raise CheckError(f"gateway: HTTP {resp.status_code} body is not JSON", expected="JSON",
                             got=resp.text[:80]) from exc
        if status != 200:
            raise CheckError(f"gateway: HTTP {status}: {str(reply)[:160]}", expected="200", got=str(status))
        problems = shapes.completion_problems(reply, model or "", False, cfg.max_tokens)
        if problems:
            raise CheckError("gateway: " + "; ".join(problems), got=problems[0])
        served, decode_hp, prefill_hp, kv_source = _routed(resp.headers)
        if decode_hp:
            return _routed_outcome(http, served, decode_hp, prefill_hp, kv_source, decodes, before)
        if not decodes:
            return "completion through the gateway (no decode pods known: P/D not verified)", {}
        after = [_kv_counters(_scrape(http, d.url)) for d in decodes]
        ext = sum((a[0] or 0.0) - (b[0] or 0.0) for a, b in zip(after, before, strict=True))
        failed = sum(a[1] - b[1] for a, b in zip(after, before, strict=True))
        if failed > 0 or ext <= 0:
            raise CheckError(f"through the gateway: external_kv_transfer +{ext:g}, failed transfers "
                             f"+{failed:g}", expected="external > 0, failed +0", got=f"+{ext:g}/+{failed:g}")
        return f"disaggregated: external_kv_transfer +{ext:g} on {len(decodes)} decode pod(s)", {}

    return timed("gateway-pd", gateway.target, step)


def _routed_outcome(http: SmokeClient, served: str, decode_hp: str, prefill_hp: str, kv_source: str,
                    decodes: list[Endpoint], before: list[tuple[float | None, float]]) -> Outcome:
    """The proof when the router named its choice: P/D happened, with KV from the chosen prefill pod."""
    if not prefill_hp:
        raise CheckError(f"the router did not disaggregate ({served})", expected="a prefill pod",
                         got="decode only")
    if kv_source.rpartition(":")[0] != prefill_hp.rpartition(":")[0]:
        raise CheckError(f"decode loaded KV from {kv_source or 'nowhere'}, not from the chosen prefill pod "
                         f"{prefill_hp}", expected=prefill_hp, got=kv_source or "none")
    decode_url = f"http://{decode_hp}"
    after = _kv_counters(_scrape(http, decode_url))
    known = next((b for d, b in zip(decodes, before, strict=True) if d.url.rstrip("/") == decode_url), None)
    ext = (after[0] or 0.0) - ((known[0] or 0.0) if known else 0.0)
    failed = after[1] - (known[1] if known else 0.0)
    if ext <= 0 or (known and failed > 0):
        raise CheckError(f"decode {decode_hp}: external_kv_transfer +{ext:g}, failed transfers +{failed:g}",
                         expected="external > 0, failed +0", got=f"+{ext:g}/+{failed:g}")
    how = "+" if known else "total "
    return (f"disaggregated ({served}): KV pulled from {kv_source}, external_kv_transfer {how}{ext:g} "
            f"on decode {decode_hp}",
            {"served_by": served, "decode": decode_hp, "prefill": prefill_hp, "kv_source": kv_source})
