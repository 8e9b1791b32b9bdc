"""Blue-green of a single LeaderWorkerSet (issue 18, "and optionally for any LWS"): a second LWS
``<name>-<rev>`` in its own InferencePool, HTTPRoute weights shifted stage by stage through the stand-in
router, the old LWS and pool deleted at the end; a failing check shifts back and deletes green.

The pools tell the two LWS's pods apart by ``leaderworkerset.sigs.k8s.io/name``, which the LWS
controller puts on every pod (lws-semantics §a), so nothing is added to the pod templates.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from lwsflow.controller.api import labels as L
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import HTTP_ROUTE, INFERENCE_POOL, LWS
from lwsflow.controller.rollout import bluegreen_kinds as K
from lwsflow.controller.rollout import bluegreen_plan as P
from lwsflow.controller.rollout import gate, session
from lwsflow.controller.rollout.hooks import HookContext, HookResult
from lwsflow.controller.rollout.options import RolloutOptions
from lwsflow.sim.config import ClusterConfig, PoolConfig, Timings
from lwsflow.sim.router import Router
from lwsflow.sim.testing import EmbeddedCluster, StoreRecorder

NS = "default"
MODEL = "chat-model"
ROUTES = "httproutes.gateway.networking.k8s.io"
POOLS = "inferencepools.inference.networking.k8s.io"
REF = {"group": "inference.networking.k8s.io", "kind": "InferencePool"}
N_REQUESTS = 200
TOLERANCE = 0.1  # |observed green share - weight| over 200 seeded draws: 2.8 sigma at 50%


class Env:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = random.randint(20_000, 60_000)
        cfg = ClusterConfig(
            pools=[PoolConfig(name="h100", count=1, gpus_per_node=8, gpu_product="H100")],
            timings=Timings(pull_gbps=100.0, image_gb=0.1, cpu_image_gb=0.1, container_start_s=1.0,
                            weight_gb=0.0))
        self.sim = EmbeddedCluster(tmp, cfg, speed=50.0, engines=True,
                                   engine_options={"side_channel_port": 0}).start()
        self.kube = Kube.connect(str(self.sim.kubeconfig))
        self.rec = StoreRecorder(self.sim, keys=[ROUTES, POOLS])

    def lws(self, image: str) -> dict[str, Any]:
        labels = {L.MODEL: "chat"}
        return {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
                "metadata": {"name": "chat", "namespace": NS, "labels": dict(labels)},
                "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
                    "metadata": {"labels": dict(labels), "annotations": {
                        "sim.lwsflow.io/load-seconds": "10", L.SERVED_MODEL: MODEL,
                        L.SERVING_PORT: str(self.port)}},
                    "spec": {"nodeSelector": {L.NODE_POOL: "h100"}, "containers": [{
                        "name": "engine", "image": image,
                        "resources": {"limits": {L.GPU_RESOURCE: 1}}}]}}}}}

    def deploy_blue(self) -> None:
        self.kube.create(LWS, NS, self.lws("vllm:1"))
        self.kube.create(INFERENCE_POOL, NS, {
            "apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
            "metadata": {"name": "chat", "namespace": NS},
            "spec": {"selector": {"matchLabels": {L.MODEL: "chat", L.WORKER_INDEX: "0"}},
                     "targetPorts": [{"number": self.port}],
                     "endpointPickerRef": {"name": "chat-epp", "port": {"number": 9002}}}})
        self.kube.create(HTTP_ROUTE, NS, {
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "chat", "namespace": NS},
            "spec": {"parentRefs": [{"name": "gw"}],
                     "rules": [{"backendRefs": [{**REF, "name": "chat", "weight": 100}]}]}})
        end = time.monotonic() + 60
        while not gate.lws_fully_rolled(self.kube.get(LWS, NS, "chat")).passed:
            assert time.monotonic() < end, "blue never became ready"
            time.sleep(0.1)

    def manifest(self, image: str) -> Path:
        path = self.tmp / f"green-{image[-1]}.yaml"
        path.write_text(yaml.safe_dump(self.lws(image)))
        return path

    def green_weights(self) -> list[int | None]:
        out: list[int | None] = []
        for rec in self.rec.entries(ROUTES, "chat"):
            st = P.BlueGreenState.from_route(rec.object)
            w = P.green_weight_of(rec.object, st.green.pool) if st.green else None
            if not out or out[-1] != w:
                out.append(w)
        return out

    def close(self) -> None:
        self.rec.stop()
        self.kube.api.close()
        self.sim.close()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    e.close()


def test_lws_blue_green_shifts_weights_stage_by_stage_and_deletes_blue(env: Env) -> None:
    env.deploy_blue()
    seen: list[tuple[int, float]] = []

    def traffic(ctx: HookContext) -> HookResult:
        router.routes.clear()
        body = {"model": MODEL, "prompt": "hi", "max_tokens": 1}
        with httpx.Client(timeout=30) as http, ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(lambda _i: http.post(f"{router.url}/v1/completions", json=body).status_code,
                                  range(N_REQUESTS)))
        assert codes == [200] * N_REQUESTS
        assert ctx.kind == L.LWS_KIND and ctx.compare == {"aggregated": (ctx.name, "chat")}
        pods = Counter(r.decode.pod for r in router.routes)
        seen.append((ctx.target_groups, sum(n for p, n in pods.items() if p.startswith(f"{ctx.name}-"))
                     / N_REQUESTS))
        return HookResult(True)

    with Router(env.sim.store, seed=11) as router:
        opts = RolloutOptions(bake_s=30, deadline_s=600, hooks=[traffic])
        out = session.run(env.kube, session.clock_for(env.kube), session.parse_target("lws/chat", NS), opts,
                          manifest=env.manifest("vllm:2"), strategy="blue-green", weights=[10, 50, 100])
    assert out.result == "succeeded", out.message
    # the blue pool was narrowed to the blue LWS's pods while no other pod existed
    first = next(r for r in env.rec.entries(POOLS, "chat")
                 if L.NAME in r.object["spec"]["selector"]["matchLabels"])
    assert first.object["spec"]["selector"]["matchLabels"] == {L.MODEL: "chat", L.WORKER_INDEX: "0",
                                                                L.NAME: "chat"}
    assert {(p["metadata"].get("labels") or {}).get(L.NAME) for p in first.pods.values()} == {"chat"}
    assert env.green_weights() == [None, 0, 10, 50, 100]
    assert [w for w, _s in seen] == [10, 50, 100]
    for weight, share in seen:
        assert abs(share - weight / 100) <= TOLERANCE, (weight, share)
    green = f"chat-{K.LwsBlueGreen(env.kube, NS).revision({'': env.lws('vllm:2')})}"
    assert [o["metadata"]["name"] for o in env.kube.list(LWS, NS)[0]] == [green]
    pools = env.kube.list(INFERENCE_POOL, NS)[0]
    assert [p["metadata"]["name"] for p in pools] == [green]
    assert pools[0]["spec"]["selector"]["matchLabels"] == {L.MODEL: "chat", L.WORKER_INDEX: "0",
                                                           L.NAME: green}
    assert env.kube.get(HTTP_ROUTE, NS, "chat")["spec"]["rules"][0]["backendRefs"] == [
        {**REF, "name": green, "weight": 100}]
    assert out.message.endswith(f"traffic on lws/{green}")


def test_lws_blue_green_failing_check_shifts_back_and_deletes_green(env: Env) -> None:
    env.deploy_blue()
    opts = RolloutOptions(deadline_s=600, hooks=[lambda _ctx: False])
    out = session.run(env.kube, session.clock_for(env.kube), session.parse_target("lws/chat", NS), opts,
                      manifest=env.manifest("vllm:2"), strategy="blue-green", weights=[50, 100])
    assert out.result == "rolled-back", out.message
    assert env.green_weights() == [None, 0, 50, None]
    assert env.kube.get(HTTP_ROUTE, NS, "chat")["spec"]["rules"][0]["backendRefs"] == [
        {**REF, "name": "chat", "weight": 100}]
    assert [o["metadata"]["name"] for o in env.kube.list(LWS, NS)[0]] == ["chat"]
    assert [p["metadata"]["name"] for p in env.kube.list(INFERENCE_POOL, NS)[0]] == ["chat"]
    blue = env.kube.get(LWS, NS, "chat")
    image = blue["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"]
    assert image == "vllm:1"
