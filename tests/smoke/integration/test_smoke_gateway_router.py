"""`lwsflow smoke --gateway-url` through the stand-in llm-d router of the embedded cluster: the
gateway-pd check proves the decode pod the EPP chose pulled its KV from the prefill pod the EPP chose
(docs/llm-d.md; ../shared/docs/smoke-reference.md §4.2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lwsflow.components.smoke import run_smoke
from lwsflow.controller.kube.resources import Resource
from lwsflow.sim.engine import ENGINE_MODE_ANNOTATION
from lwsflow.sim.router import Router
from tests.smoke.integration.test_smoke_cluster import Sim, lws
from tests.smoke.smoke_helpers import by_name, fast_config

POOL = Resource("inference.networking.k8s.io", "v1", "inferencepools")


def member(obj: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]["app"] = "chat"
    return obj


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Sim]:
    s = Sim(tmp_path)
    yield s
    s.close()


def _pool(sim: Sim) -> None:
    sim.kube.create(POOL, "default", {
        "apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
        "metadata": {"name": "chat"},
        "spec": {"selector": {"matchLabels": {"app": "chat"}}, "targetPorts": [{"number": sim.port}],
                 "endpointPickerRef": {"name": "chat-epp", "port": {"number": 9002}}}})


def test_gateway_pd_through_the_stand_in_router(sim: Sim) -> None:
    sim.create(member(lws("chat-prefill", role="prefill", replicas=1, exclusive=False, pool="a100",
                          product="NVIDIA-A100")))
    sim.create(member(lws("chat-decode", role="decode", replicas=2, exclusive=False)))
    sim.wait_engines(3)
    _pool(sim)
    with Router(sim.sim.store) as router:
        report = run_smoke(fast_config(gateway_url=router.url, request_timeout_s=5.0))
        assert report.passed, [(c.name, c.detail) for c in report.failed()]
        route = router.routes[-1]
    assert route.prefill is not None and route.prefill.pod.startswith("chat-prefill-")
    assert route.decode.pod.startswith("chat-decode-")
    gw = by_name(report)["gateway-pd"][0]
    prefill_ip = route.prefill.ip
    assert f"KV pulled from {prefill_ip}:" in gw.detail, gw.detail
    assert f"decode=default/{route.decode.pod}; prefill=default/{route.prefill.pod}" in gw.detail
    decode = next(h for h in sim.hook.engines.values() if h.host == route.decode.ip)
    text = decode.engine.metrics.render().decode()
    assert 'source="external_kv_transfer"} 0.0' not in text  # the decode pod really loaded remote KV


def test_gateway_pd_fails_when_decode_recomputes(sim: Sim) -> None:
    """A decode release with kv_load_failure_policy=recompute and a broken prefill side channel still
    answers 200, but its KV never arrived: gateway-pd must fail."""
    sim.create(member(lws("chat-prefill", role="prefill", replicas=1, exclusive=False,
                          annotations={ENGINE_MODE_ANNOTATION: "broken-handoff"})))
    sim.create(member(lws("chat-decode", role="decode", replicas=1, exclusive=False,
                          annotations={ENGINE_MODE_ANNOTATION: "kv-recompute"})))
    sim.wait_engines(2)
    _pool(sim)
    with Router(sim.sim.store) as router:
        report = run_smoke(fast_config(gateway_url=router.url, request_timeout_s=5.0))
    assert {c.name for c in report.failed()} == {"gateway-pd"}
    assert "external_kv_transfer +0" in by_name(report)["gateway-pd"][0].detail
