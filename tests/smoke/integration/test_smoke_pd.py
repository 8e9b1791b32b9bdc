"""The P/D hand-off check: a healthy pair passes; each way the hand-off breaks fails the right step."""

from __future__ import annotations

import pytest

from lwsflow.components.smoke import run_smoke
from tests.smoke.smoke_helpers import ToyPDProxy, by_name, failed_names, fast_config

PD = {"pd-prefill", "pd-decode", "pd-metrics"}


def test_healthy_pair_passes_with_external_kv_tokens(engine):
    p, d = engine("prefill"), engine("decode")
    report = run_smoke(fast_config(prefill_url=p.url, decode_url=d.url))
    assert report.passed, report.failed()
    checks = by_name(report)
    assert all(len(checks[n]) == 1 and checks[n][0].passed for n in PD)
    assert checks["pd-metrics"][0].data["external_kv_tokens"] > 100  # the long gateway-style prompt
    params = checks["pd-prefill"][0].data["kv_transfer_params"]
    assert params["remote_host"] == "127.0.0.1" and params["remote_block_ids"]


@pytest.mark.parametrize(("prefill_modes", "decode_modes", "expected"), [
    # the prefill's side channel refuses the pull: decode errors (policy fail), and the counter shows it
    pytest.param("broken-handoff", "", {"pd-decode", "pd-metrics"}, id="broken-handoff"),
    # the prefill answers without transfer params: nothing to hand to the decoder
    pytest.param("no-kv-params", "", {"pd-prefill"}, id="no-kv-params"),
    # decode with kv_load_failure_policy=recompute: the completion succeeds although no KV arrived;
    # only the metrics step can tell
    pytest.param("broken-handoff", "kv-recompute", {"pd-metrics"}, id="silent-recompute"),
])
def test_broken_handoff_fails(engine, prefill_modes, decode_modes, expected):
    p, d = engine("prefill", modes=prefill_modes), engine("decode", modes=decode_modes)
    report = run_smoke(fast_config(prefill_url=p.url, decode_url=d.url))
    assert not report.passed
    assert failed_names(report) == expected, [(c.name, c.detail) for c in report.failed()]


def test_prefill_without_connector_is_caught(engine):
    """An aggregated engine (no kv connector) put where the prefiller should be returns no params."""
    p, d = engine("aggregated"), engine("decode")
    report = run_smoke(fast_config(prefill_url=p.url, decode_url=d.url))
    assert failed_names(report) == {"pd-prefill"}
    skipped = [c for c in report.checks if c.skipped]
    assert {c.name for c in skipped} == {"pd-decode", "pd-metrics"}


def test_dead_prefill_skips_handoff_with_reason(engine):
    p, d = engine("prefill"), engine("decode")
    p.stop()
    report = run_smoke(fast_config(prefill_url=p.url, decode_url=d.url))
    pd_checks = [c for c in report.checks if c.name in PD]
    assert len(pd_checks) == 3 and all(c.skipped and "health failed" in c.detail for c in pd_checks)
    assert "health" in failed_names(report)


def test_gateway_uses_long_random_prompt_and_checks_decode_metrics(engine):
    """A stand-in 'gateway' that is itself a decode engine: requests through it are aggregated (no
    kv_transfer_params), so the gateway-pd check sees no external KV tokens on the decode pods and
    fails, which is exactly the silent-aggregation case the reference warns about."""
    d = engine("decode")
    p = engine("prefill")
    report = run_smoke(fast_config(prefill_url=p.url, decode_url=d.url, gateway_url=d.url))
    gw = by_name(report)["gateway-pd"][0]
    assert not gw.passed and "external_kv_transfer +0" in gw.detail
    comp = [c for c in by_name(report)["completions"] if c.target == d.url]
    assert comp and all(c.passed for c in comp)


def test_gateway_that_disaggregates_passes(engine):
    p, d = engine("prefill"), engine("decode")
    proxy = ToyPDProxy(p.url, d.url)
    try:
        report = run_smoke(fast_config(prefill_url=p.url, decode_url=d.url, gateway_url=proxy.url))
    finally:
        proxy.stop()
    assert report.passed, [(c.name, c.detail) for c in report.failed()]
    gw_checks = [c for c in report.checks if c.target == proxy.url]
    assert {c.name for c in gw_checks} == {"models", "completions", "chat", "completions-stream",
                                           "chat-stream", "error-shape", "ttft", "itl", "gateway-pd"}
    assert "disaggregated" in by_name(report)["gateway-pd"][0].detail
    assert proxy.handoffs >= 5


def test_model_discovered_from_v1_models_is_used_by_the_handoff(engine):
    """Issue 13.4: without --model the single-engine checks found the served model in /v1/models but
    the P/D hand-off still sent ``"model": null`` (`The model 'None' does not exist`)."""
    p, d = engine("prefill", model="org/served-only"), engine("decode", model="org/served-only")
    gw = engine("decode", model="org/served-only")
    report = run_smoke(fast_config(model=None, prefill_url=p.url, decode_url=d.url, gateway_url=gw.url))
    checks = by_name(report)
    for name in ("pd-prefill", "pd-decode", "gateway", "gateway-pd"):
        for c in checks.get(name, []):
            assert "None" not in c.detail, (c.name, c.detail)
    assert all(c.passed for n in PD for c in checks[n]), [(c.name, c.detail) for c in report.failed()]
    assert "org/served-only" in checks["models"][0].detail
