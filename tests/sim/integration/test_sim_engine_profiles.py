"""Engine behaviour profiles by image digest (issue 17): a release that is Ready but slower, flakier or
decaying serves that way for real, and its /metrics (vLLM names) show it, so analysis can catch what
readiness cannot."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import httpx

from lwsflow.controller.api import labels as L
from lwsflow.sim.cluster import Cluster
from lwsflow.sim.config import ImageProfile
from lwsflow.sim.engine import start_engine
from lwsflow.sim.engine.openai_api import Engine, EngineOptions
from lwsflow.sim.lws_controller import LWS
from tests.sim.sim_helpers import available, make_lws, small_config

SLOW = "sha256:" + "5" * 64


def _metric(text: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    assert m, name
    return float(m.group(1))


def test_error_ratio_fails_that_share_of_requests_and_counts_them() -> None:
    with start_engine(model="m", error_ratio=0.3, seed=7) as eng, httpx.Client(base_url=eng.url) as c:
        codes = [c.post("/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 2}).status_code
                 for _ in range(200)]
        metrics = c.get("/metrics").text
    errors = codes.count(500)
    assert set(codes) == {200, 500} and 40 <= errors <= 80  # 30% of 200, seeded
    assert _metric(metrics, 'vllm:request_success_total{engine="0",finished_reason="error",model_name="m"}') \
        == errors


def test_kv_failure_ratio_fails_decode_pulls_as_nixl_failures() -> None:
    with start_engine(model="m", role="decode", kv_failure_ratio=1.0) as eng, \
            httpx.Client(base_url=eng.url) as c:
        kvp = {"do_remote_prefill": True, "remote_host": "127.0.0.1", "remote_port": 1}
        r = c.post("/v1/completions", json={"model": "m", "prompt": "hi", "kv_transfer_params": kvp})
        metrics = c.get("/metrics").text
    assert r.status_code == 500 and "KV load failed" in r.text
    assert _metric(metrics, 'vllm:nixl_num_failed_transfers_total{engine="0",model_name="m"}') == 1


def test_latency_spread_matches_median_and_p95() -> None:
    eng = Engine("127.0.0.1", "aggregated", "m", EngineOptions(ttft_s=0.1, ttft_p95_s=0.2, seed=1))
    samples = sorted(eng._latency("completions")[0] for _ in range(4000))
    assert abs(samples[2000] - 0.1) < 0.01 and abs(samples[3800] - 0.2) < 0.02


def test_slowdown_grows_latency_with_uptime() -> None:
    eng = Engine("127.0.0.1", "aggregated", "m", EngineOptions(ttft_s=0.1, slowdown_per_min=60.0))
    eng.started -= 1.0  # one second up at 60x per minute: twice as slow
    assert 0.19 < eng._latency("completions")[0] < 0.21


def test_cluster_runs_each_digest_with_its_profile() -> None:
    """The profile is looked up by the leader container's image digest (docs/embedded-cluster.md,
    "Image behaviour by digest"); pods of another digest run the default engine."""
    cfg = small_config(nodes=2, domains=1)
    cfg.serve_engines = True
    cfg.images[SLOW] = ImageProfile(ttft_s=0.063, error_ratio=0.1, slowdown_per_min=0.1)
    c = Cluster(cfg)
    port = random.randint(20_000, 32_000)  # below the ephemeral ports (32768+)
    for name, image in (("slow", f"r.example/engine@{SLOW}"), ("good", "r.example/engine:v1")):
        lws = make_lws(name, replicas=1, size=1, image=image)
        lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
            L.SERVING_PORT: str(port)}
        c.store.create(LWS, lws)
    try:
        c.run_until(lambda cl: available("slow")(cl) and available("good")(cl), 3600)
        hook = c._own_hooks[0]
        opts = {name: hook.engines[("default", f"{name}-0")].engine.options for name in ("slow", "good")}
        assert (opts["slow"].ttft_s, opts["slow"].error_ratio) == (0.063, 0.1)
        assert (opts["good"].ttft_s, opts["good"].error_ratio) == (0.0, 0.0)
        slow = hook.engines[("default", "slow-0")].engine
        before = slow._latency("completions")[0]
        c.advance(600)  # ten cluster minutes (no wall time passes): 10 x 10% slower
        assert abs(slow._latency("completions")[0] - before - 0.063) < 1e-6
    finally:
        c.close()


def test_replaced_pod_of_the_same_name_gets_its_own_engine() -> None:
    """A rolling update recreates a group's leader under the same name; the new pod may run before
    the old one's stop is reported. The new pod must get its own engine (its image's profile), and the
    late stop must not take it down (found by the analysis rollout test: the old engine kept serving)."""
    from lwsflow.sim.engine import EnginePodHook

    hook = EnginePodHook(profile_of={SLOW: ImageProfile(ttft_s=0.063)}.get)
    port = random.randint(20_000, 32_000)  # below the ephemeral ports (32768+)

    def pod(uid: str, ip: str, image: str) -> dict:
        return {"metadata": {"name": "llama-1", "namespace": "default", "uid": uid,
                             "annotations": {L.SERVING_PORT: str(port)}},
                "spec": {"containers": [{"name": "engine", "image": image}]},
                "status": {"podIP": ip}}
    old = pod("u-old", "127.0.0.1", "r.example/vllm:v1")
    new = pod("u-new", "127.0.0.2", f"r.example/vllm@{SLOW}")
    try:
        hook.on_running(old)
        hook.on_running(new)
        hook.on_stopped(old)
        eng = hook.engines[("default", "llama-1")]
        assert (eng.host, eng.engine.options.ttft_s) == ("127.0.0.2", 0.063)
        assert httpx.get(f"http://127.0.0.2:{port}/health").status_code == 200
    finally:
        hook.close()


def test_stopped_engine_closes_its_keep_alive_connections() -> None:
    """A pod that goes away takes its process's connections with it. A replaced leader keeps its pod IP
    and port, and clients (the load generator, a router) hold keep-alive connections: after the old
    engine stops, the next request must reach the new engine, not a handler thread of the old one
    (found measuring analysis windows: the new revision's pod got almost no traffic for 30 s, its rate()
    windows "no data"; docs/analysis.md, the time rule)."""
    port = random.randint(20_000, 32_000)  # below the ephemeral ports (32768+)
    body = {"model": "old", "prompt": "hi", "max_tokens": 2}
    with httpx.Client(timeout=5) as client:
        with start_engine(port=port, model="old") as old:
            assert client.post(f"{old.url}/v1/completions", json=body).json()["model"] == "old"
        with start_engine(port=port, model="new") as new:
            got = client.post(f"{new.url}/v1/completions", json={**body, "model": "new"})
            assert got.status_code == 200 and got.json()["model"] == "new"
            assert new.engine.metrics.render().count(b"vllm:request_success_total{") >= 1


def test_slowdown_counts_cluster_minutes_at_speed(tmp_path: Path) -> None:
    """Served at a speed (sim serve, the harness of tests, demo and bench), a profile's slowdown counts
    the cluster's minutes, the time the rollout and its bakes run in: at speed 60 one wall second is
    a cluster minute, so `slowdown_per_min: 1.0` doubles the latency within about a wall second."""
    from lwsflow.sim.testing import EmbeddedCluster

    cfg = small_config(nodes=1, domains=1)
    cfg.images[SLOW] = ImageProfile(ttft_s=0.05, slowdown_per_min=1.0)
    port = random.randint(20_000, 32_000)  # below the ephemeral ports (32768+)
    with EmbeddedCluster(tmp_path, cfg, speed=60.0, engines=True) as sim:
        lws = make_lws("slow", replicas=1, size=1, image=f"r.example/engine@{SLOW}")
        lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {
            L.SERVING_PORT: str(port)}
        sim.store.create(LWS, lws)
        deadline = time.monotonic() + 30
        while ("default", "slow-0") not in sim.engines.engines:
            assert time.monotonic() < deadline, "the leader pod never ran"
            time.sleep(0.05)
        eng = sim.engines.engines[("default", "slow-0")].engine
        up0, wall0 = sim.cluster.now() - eng.started, time.monotonic()
        time.sleep(1.0)
        cluster_min = (sim.cluster.now() - eng.started) / 60
        assert cluster_min - up0 / 60 >= 0.9 * (time.monotonic() - wall0)  # ~1 cluster minute per wall s
        assert abs(eng._latency("completions")[0] - 0.05 * (1 + cluster_min)) < 0.05 * 0.1
