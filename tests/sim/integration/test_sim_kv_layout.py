"""The KV-layout version of the stand-in engine (issue 17, cross-revision P/D compatibility): a decode
engine checks the prefill engine's compatibility hash at the NIXL handshake before it pulls any KV, as
vLLM does since PR #29503 ("NIXL compatibility hash mismatch ... Prefill and decode instances have
incompatible configurations"), and with ``kv_load_failure_policy=fail`` the request fails."""

from __future__ import annotations

import random
import re

import httpx

from lwsflow.controller.api import labels as L
from lwsflow.sim.cluster import Cluster
from lwsflow.sim.config import ClusterConfig, ImageProfile
from lwsflow.sim.engine import start_engine
from lwsflow.sim.engine.kv import compatibility_hash
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import available, make_lws, small_config

NEW = "sha256:" + "7" * 64
PREFILL_PARAMS = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                  "remote_block_ids": None, "remote_host": None, "remote_port": None}


def _failed(metrics: str) -> float:
    m = re.search(r'^vllm:nixl_num_failed_transfers_total\{[^}]*\} (\S+)$', metrics, re.M)
    assert m
    return float(m.group(1))


def _handoff(prefill_layout: str, decode_layout: str, modes: str = "") -> tuple[httpx.Response, str]:
    with start_engine(model="m", role="prefill", kv_layout=prefill_layout) as p, \
            start_engine(model="m", role="decode", kv_layout=decode_layout, modes=modes) as d, \
            httpx.Client() as c:
        first = c.post(f"{p.url}/v1/completions", json={"model": "m", "prompt": "a long prompt " * 8,
                                                        "max_tokens": 1,
                                                        "kv_transfer_params": PREFILL_PARAMS})
        assert first.status_code == 200
        params = first.json()["kv_transfer_params"]
        second = c.post(f"{d.url}/v1/completions", json={"model": "m", "prompt": "a long prompt " * 8,
                                                         "max_tokens": 4, "kv_transfer_params": params})
        return second, c.get(f"{d.url}/metrics").text


def test_same_layout_hands_off() -> None:
    resp, metrics = _handoff("1", "1")
    assert resp.status_code == 200 and resp.json()["usage"]["completion_tokens"] == 4
    assert _failed(metrics) == 0


def test_different_layouts_fail_at_the_handshake_like_vllm() -> None:
    resp, metrics = _handoff("1", "2")
    assert resp.status_code == 500
    msg = resp.json()["error"]["message"]
    assert "KV load failed (kv_load_failure_policy=fail)" in msg
    assert "NIXL compatibility hash mismatch" in msg and "incompatible configurations" in msg
    assert f"Local: {compatibility_hash('0.33.0', '2')}, Remote: {compatibility_hash('0.33.0', '1')}" in msg
    assert _failed(metrics) == 1


def test_recompute_policy_hides_the_mismatch_but_counts_it() -> None:
    """kv_load_failure_policy=recompute: the request succeeds, only the failed-transfer counter shows it."""
    resp, metrics = _handoff("2", "1", modes="kv-recompute")
    assert resp.status_code == 200 and _failed(metrics) == 1


def test_image_profile_sets_the_layout_by_digest() -> None:
    """Configurable per image digest in the cluster config (``images: {sha256:...: {kv_layout: "2"}}``);
    every other image keeps the default layout."""
    cfg = small_config(nodes=2, domains=1)
    cfg.serve_engines = True
    cfg.images[NEW] = ImageProfile(kv_layout="2")
    parsed = ClusterConfig.from_dict({"pools": [], "images": {NEW: {"kv_layout": "2"}}})
    assert parsed.images[NEW].kv_layout == "2"
    c = Cluster(cfg)
    port = random.randint(20_000, 32_000)  # below the ephemeral ports (32768+)
    for name, image in (("new", f"r.example/engine@{NEW}"), ("old", "r.example/engine:v1")):
        lws = make_lws(name, replicas=1, size=1, image=image)
        lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
            L.SERVING_PORT: str(port)}
        c.store.create(LWS, lws)
    try:
        c.run_until(lambda cl: available("new")(cl) and available("old")(cl), 3600)
        hook = c._own_hooks[0]
        layouts = {n: hook.engines[("default", f"{n}-0")].engine.options.kv_layout for n in ("new", "old")}
        assert layouts == {"new": "2", "old": "1"}
    finally:
        c.close()
