"""Headers and params on the wire along proxy -> decode sidecar -> prefill -> decode engine, as llm-d
writes them (../shared/docs/smoke-reference.md §4.1 two-call NIXL flow, §4.2 headers), over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from lwsflow.sim.router import Router, RoutingSidecar, wire
from tests.router.router_helpers import LONG_PROMPT, MODEL, SHORT_PROMPT, Pods, Recorder, add_pod, pool


class RecordingSidecar(RoutingSidecar):
    """The real sidecar, keeping the headers the proxy sent it."""

    def __init__(self, *a: object, **kw: object) -> None:
        super().__init__(*a, **kw)  # type: ignore[arg-type]
        self.received: list[dict[str, str]] = []

    def handle(self, path: str, raw: bytes, headers: dict[str, str]) -> wire.Reply:
        self.received.append(dict(headers))
        return super().handle(path, raw, headers)


@pytest.fixture
def path(pods: Pods) -> Iterator[tuple[Router, Recorder, Recorder, RecordingSidecar]]:
    """Prefill and decode engines behind recording hops; the pool's pods are the hops."""
    pre = pods.start("p-engine", "prefill")
    dec = pods.start("d-engine", "decode")
    for name in ("p-engine", "d-engine"):  # only the hops are pool members
        pods.store.delete("pods", "default", name)
    ip_p, ip_d = "127.0.250.2", "127.0.250.3"
    rec_p = Recorder(ip_p, pods.port, (pre.host, pre.port))
    rec_d = Recorder(ip_d, pods.port, (dec.host, dec.port))
    add_pod(pods.store, "prefill-0", "prefill", ip_p)
    add_pod(pods.store, "decode-0", "decode", ip_d)
    pods.store.create("inferencepools.inference.networking.k8s.io", pool(pods.port))
    router = Router(pods.store)
    sc = RecordingSidecar(ip_d, pods.port)
    router._sidecars[(ip_d, pods.port)] = sc
    yield router, rec_p, rec_d, sc
    router.close()
    rec_p.close()
    rec_d.close()


def test_long_prompt_goes_through_prefill_then_decode_with_kv_params(path: tuple) -> None:
    router, rec_p, rec_d, sc = path
    r = httpx.post(f"{router.url}/v1/completions",
                   json={"model": MODEL, "prompt": LONG_PROMPT, "max_tokens": 6, "stream": False,
                         "stream_options": None}, timeout=30)
    assert r.status_code == 200, r.text
    # proxy -> sidecar: the EPP's choice as llm-d's gateway sends it
    sent = sc.received[-1]
    assert sent[wire.DESTINATION_ENDPOINT] == sc.host_port
    assert sent[wire.PREFILLER_HOST_PORT] == f"127.0.250.2:{router.routes[-1].prefill.port}"
    # sidecar -> prefill: one token, not streamed, no stream_options, do_remote_decode
    (p_path, p_hdrs, p_body), = rec_p.seen
    assert p_path == "/v1/completions"
    assert (p_body["max_tokens"], p_body["stream"], "stream_options" in p_body) == (1, False, False)
    assert p_body["kv_transfer_params"] == {"do_remote_decode": True, "do_remote_prefill": False,
                                            "remote_engine_id": None, "remote_block_ids": None,
                                            "remote_host": None, "remote_port": None}
    assert wire.PREFILLER_HOST_PORT not in p_hdrs and p_hdrs.get(wire.REQUEST_ID)
    # sidecar -> own engine: the original body plus the params the prefill engine returned
    (_, d_hdrs, d_body), = rec_d.seen
    kvp = d_body["kv_transfer_params"]
    assert d_body["max_tokens"] == 6 and d_body["prompt"] == LONG_PROMPT
    assert kvp["do_remote_prefill"] is True and kvp["remote_block_ids"]
    assert {"remote_engine_id", "remote_host", "remote_port"} <= set(kvp)
    assert d_hdrs[wire.REQUEST_ID] == p_hdrs[wire.REQUEST_ID]
    # the decode engine pulled the KV (vLLM's kv_load_failure_policy=fail would 4xx/5xx otherwise)
    assert r.json()["usage"]["completion_tokens"] > 0
    assert r.headers[wire.SERVED_BY] == "decode=default/decode-0; prefill=default/prefill-0"
    assert r.headers[wire.KV_SOURCE] == f"{kvp['remote_host']}:{kvp['remote_port']}"
    assert "prefill default/prefill-0" in router.routes[-1].line()


def test_short_prompt_is_decoded_alone(path: tuple) -> None:
    router, rec_p, rec_d, sc = path
    r = httpx.post(f"{router.url}/v1/completions", json={"model": MODEL, "prompt": SHORT_PROMPT,
                                                         "max_tokens": 4}, timeout=30)
    assert r.status_code == 200, r.text
    assert wire.PREFILLER_HOST_PORT not in sc.received[-1]
    assert rec_p.seen == []
    (_, _, d_body), = rec_d.seen
    assert "kv_transfer_params" not in d_body
    assert r.headers[wire.SERVED_BY] == "decode=default/decode-0"
    assert router.routes[-1].prefill is None


def test_prefill_error_is_returned_as_is(pods: Pods) -> None:
    pods.start("prefill-0", "prefill", modes="status500")
    pods.start("decode-0", "decode")
    pods.store.create("inferencepools.inference.networking.k8s.io", pool(pods.port))
    with Router(pods.store) as router:
        r = httpx.post(f"{router.url}/v1/completions", json={"model": MODEL, "prompt": LONG_PROMPT},
                       timeout=30)
    assert r.status_code == 500 and r.json()["error"]["type"] == "InternalServerError"


def test_unknown_model_and_no_pool_answer_clearly(pods: Pods) -> None:
    with Router(pods.store) as router:
        r = httpx.post(f"{router.url}/v1/completions", json={"model": "nope", "prompt": "x"}, timeout=10)
        assert r.status_code == 404 and "no InferencePool serves model 'nope'" in r.text
        assert httpx.post(f"{router.url}/v1/completions", content=b"{", timeout=10).status_code == 400


def test_sidecars_of_gone_pods_are_stopped(pods: Pods) -> None:
    pods.start("decode-0", "decode")
    pods.store.create("inferencepools.inference.networking.k8s.io", pool(pods.port))
    body = {"model": MODEL, "prompt": SHORT_PROMPT, "max_tokens": 1}
    with Router(pods.store) as router:
        assert httpx.post(f"{router.url}/v1/completions", json=body, timeout=30).status_code == 200
        (old,) = router._sidecars.values()
        pods.store.delete("pods", "default", "decode-0")  # a rollout replaced the pod
        pods.start("decode-1", "decode")
        assert httpx.post(f"{router.url}/v1/completions", json=body, timeout=30).status_code == 200
        new = pods.engines["decode-1"]
        assert [s.engine for s in router._sidecars.values()] == [(new.host, new.port)]
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://{old.host_port}/health", timeout=2)
