"""The smoke gateway-pd check through the stand-in router: it passes only when the router really
disaggregated and the decode engine loaded KV from the prefill pod the EPP chose."""

from __future__ import annotations

from lwsflow.components.smoke import SmokeConfig, run_smoke
from lwsflow.sim.router import Router
from tests.router.router_helpers import MODEL, Pods, pool


def _cfg(url: str) -> SmokeConfig:
    return SmokeConfig(gateway_url=url, model=MODEL, request_timeout_s=10.0, warmup_s=0.5, retries=1,
                       backoff_s=0.05, deadline_s=60.0, max_tokens=4)


def _gateway_pd(pods: Pods, **router_options: object) -> tuple[bool, str]:
    pods.start("prefill-0", "prefill")
    pods.start("decode-0", "decode")
    pods.store.create("inferencepools.inference.networking.k8s.io", pool(pods.port))
    with Router(pods.store, **router_options) as router:  # type: ignore[arg-type]
        report = run_smoke(_cfg(router.url))
    check = next(c for c in report.checks if c.name == "gateway-pd")
    return check.passed, check.detail


def test_gateway_pd_passes_with_kv_from_the_chosen_prefill(pods: Pods) -> None:
    passed, detail = _gateway_pd(pods)
    prefill_ip = pods.engines["prefill-0"].host
    assert passed, detail
    assert "decode=default/decode-0; prefill=default/prefill-0" in detail
    assert f"KV pulled from {prefill_ip}:" in detail


def test_gateway_pd_fails_when_the_router_does_not_disaggregate(pods: Pods) -> None:
    passed, detail = _gateway_pd(pods, non_cached_tokens=0)
    assert not passed and "did not disaggregate (decode=default/decode-0)" in detail
