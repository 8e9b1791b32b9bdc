"""Blue-green of a P/D pair on the embedded cluster (issue 18): a second LWS pair in its own
InferencePool, HTTPRoute weights shifted stage by stage, traffic observed through the stand-in llm-d
router, the old pool deleted at the end; a slower green caught by analysis and shifted back; a capacity
refusal that names the missing GPUs; a controller SIGKILLed mid-shift and resumed.

llm-d's advice for P/D upgrades (docs/llm-d.md): a new InferencePool per revision, traffic moved by
HTTPRoute backendRef weights (Gateway API: a backend's share is weight / sum of weights).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
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
from lwsflow.controller.rollout import bluegreen_plan as P
from lwsflow.controller.rollout import session
from lwsflow.controller.rollout.hooks import HookContext, HookResult
from lwsflow.controller.rollout.options import RolloutOptions
from lwsflow.pipelines.cli import main
from lwsflow.sim.config import ClusterConfig, ImageProfile, PoolConfig, Timings
from lwsflow.sim.router import Router
from lwsflow.sim.testing import EmbeddedCluster, StoreRecorder

NS = "default"
MODEL = "chat-model"
BLUE = "sha256:" + "1" * 64
GREEN = "sha256:" + "3" * 64  # as fast as blue
SLOWER = "sha256:" + "2" * 64  # ready, but 40% slower TTFT
ROUTES = "httproutes.gateway.networking.k8s.io"
REF = {"group": "inference.networking.k8s.io", "kind": "InferencePool"}
N_REQUESTS = 200  # per weight stage, through the router
TOLERANCE = 0.1  # |observed green share - weight| over 200 seeded draws: 2.8 sigma at 50%


class Env:
    def __init__(self, tmp: Path, *, speed: float = 50.0, gpus_per_node: int = 8) -> None:
        self.tmp = tmp
        self.port = random.randint(20_000, 60_000)
        cfg = ClusterConfig(
            pools=[PoolConfig(name="h100", count=1, gpus_per_node=gpus_per_node, gpu_product="H100")],
            timings=Timings(pull_gbps=100.0, image_gb=0.1, cpu_image_gb=0.1, container_start_s=1.0,
                            weight_gb=0.0),
            images={BLUE: ImageProfile(ttft_s=0.045), GREEN: ImageProfile(ttft_s=0.045),
                    SLOWER: ImageProfile(ttft_s=0.063)})
        self.sim = EmbeddedCluster(tmp, cfg, speed=speed, engines=True,
                                   engine_options={"side_channel_port": 0}).start()
        self.kube = Kube.connect(str(self.sim.kubeconfig))
        self.routes = StoreRecorder(self.sim, keys=[ROUTES])

    def lws(self, role: str, digest: str, gpus: int = 1) -> dict[str, Any]:
        labels = {L.MODEL: "chat", L.PD_PAIR: "chat", L.ROLE: role}
        return {"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
                "metadata": {"name": f"chat-{role}", "namespace": NS, "labels": dict(labels)},
                "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
                    "metadata": {"labels": dict(labels), "annotations": {
                        "sim.lwsflow.io/load-seconds": "10", L.SERVED_MODEL: MODEL,
                        L.SERVING_PORT: str(self.port)}},
                    "spec": {"nodeSelector": {L.NODE_POOL: "h100"}, "containers": [{
                        "name": "engine", "image": f"r.example/vllm@{digest}",
                        "resources": {"limits": {L.GPU_RESOURCE: gpus}}}]}}}}}

    def deploy_blue(self, gpus: int = 1) -> None:
        for role in P.ROLES:
            self.kube.create(LWS, NS, self.lws(role, BLUE, gpus))
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
        while not all((self.kube.get(LWS, NS, f"chat-{r}").get("status") or {}).get("readyReplicas") == 2
                      for r in P.ROLES):
            assert time.monotonic() < end, "blue never became ready"
            time.sleep(0.1)

    def manifest(self, digest: str) -> Path:
        path = self.tmp / f"green-{digest[7:12]}.yaml"
        path.write_text(yaml.safe_dump_all([self.lws(r, digest) for r in P.ROLES]))
        return path

    def green_weights(self) -> list[int | None]:
        """Green's weight after each recorded write of the route (None: no green backendRef)."""
        out: list[int | None] = []
        for rec in self.routes.entries(ROUTES, "chat"):
            st = P.BlueGreenState.from_route(rec.object)
            w = P.green_weight_of(rec.object, st.green.pool) if st.green else None
            if not out or out[-1] != w:
                out.append(w)
        return out

    def close(self) -> None:
        self.routes.stop()
        self.kube.api.close()
        self.sim.close()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    e.close()


def _share_hook(env: Env, router: Router, seen: list[tuple[int, float, set[str]]]) -> Any:
    """At each weight stage: N seeded requests through the router; the share served by green pods."""
    def traffic(ctx: HookContext) -> HookResult:
        router.routes.clear()
        body = {"model": MODEL, "prompt": "hi", "max_tokens": 1}
        # 8 at a time: the seeded weight draws are the same sequence whichever request makes them
        with httpx.Client(timeout=30) as http, ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(lambda _i: http.post(f"{router.url}/v1/completions", json=body).status_code,
                                  range(N_REQUESTS)))
        assert codes == [200] * N_REQUESTS
        green = ctx.compare["decode"][0]
        pods = Counter(r.decode.pod for r in router.routes)
        share = sum(n for pod, n in pods.items() if pod.startswith(green)) / N_REQUESTS
        seen.append((ctx.target_groups, share, set(pods)))
        return HookResult(True, f"green share {share:.2f} at weight {ctx.target_groups}")
    return traffic


def test_blue_green_shifts_weights_stage_by_stage_and_deletes_blue(env: Env) -> None:
    env.deploy_blue()
    seen: list[tuple[int, float, set[str]]] = []
    lines: list[str] = []
    with Router(env.sim.store, seed=11) as router:
        opts = RolloutOptions(bake_s=30, deadline_s=600, hooks=[_share_hook(env, router, seen)])
        out = session.run(env.kube, session.clock_for(env.kube), session.parse_target("pair/chat", NS), opts,
                          manifest=env.manifest(GREEN), strategy="blue-green", weights=[10, 50, 100],
                          log=lines.append)
    assert out.result == "succeeded", out.message
    assert any(line.startswith("capacity blue-green: both revisions fit") for line in lines), lines
    # the route was written stage by stage: green added at 0, then 10, 50, 100 (blue dropped)
    assert env.green_weights() == [None, 0, 10, 50, 100]
    for weight, share, pods in seen:
        assert abs(share - weight / 100) <= TOLERANCE, (weight, share)
        assert all(p.startswith("chat-") and "-decode-" in p for p in pods), pods  # decode pods only
    assert [w for w, _s, _p in seen] == [10, 50, 100] and seen[-1][1] == 1.0
    st = P.BlueGreenState.from_route(env.kube.get(HTTP_ROUTE, NS, "chat"))
    assert st.phase == P.SUCCEEDED and st.green is not None
    rules = env.kube.get(HTTP_ROUTE, NS, "chat")["spec"]["rules"]
    assert rules[0]["backendRefs"] == [{**REF, "name": st.green.pool, "weight": 100}]
    # the old pair and pool are gone; green serves under its own names
    names = {o["metadata"]["name"] for o in env.kube.list(LWS, NS)[0]}
    assert names == set(st.green.lws.values())
    assert {p["metadata"]["name"] for p in env.kube.list(INFERENCE_POOL, NS)[0]} == {st.green.pool}
    assert out.message.endswith(f"traffic on pair/{st.green.pair}")


SPEC = {"window": "5s", "metrics": [{
    "name": "ttft-p95", "initialDelay": "8s", "interval": "1s", "count": 3, "failureLimit": 1,
    "inconclusiveLimit": 1,
    "provider": {"prometheus": {"query": (
        'histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket'
        '{namespace="{{namespace}}",lws="{{lws}}",revision="{{revision}}"}[{{window}}])))')}},
    "compare": {"mode": "relative", "tolerance": 10}}]}


def _analysed(env: Env, tmp_path: Path, digest: str) -> tuple[int, dict[str, Any]]:
    """A blue-green at 50% then 100%, with seeded load through the router and the analysis per stage.
    Prompts of 20-40 words (>= 16 tokens) are disaggregated, so both roles serve and are compared.
    Not streamed: for a stream the stand-in engine measures TTFT in wall time, and on a loaded 2-core
    machine thread scheduling moves that p95 by more than the 10% tolerance between equal revisions."""
    from lwsflow.components.loadgen import LoadGenerator, LoadSpec

    env.deploy_blue()
    spec, rep = tmp_path / "analysis.yaml", tmp_path / "report.json"
    spec.write_text(yaml.safe_dump(SPEC))
    with Router(env.sim.store, seed=5) as router, \
            LoadGenerator(LoadSpec(model=MODEL, rate=40, seed=3, max_tokens=(2, 4), prompt_words=(20, 40),
                                   stream_share=0.0),
                          lambda: [router.url]) as load:
        rc = main(["rollout", "run", "pair/chat", "-n", NS, "--kubeconfig", str(env.sim.kubeconfig),
                   "--manifest", str(env.manifest(digest)), "--strategy", "blue-green",
                   "--weights", "50,100", "--analysis", str(spec), "--prometheus", "local",
                   "--report", str(rep)])
    # a request in flight to a pod being deleted (green on rollback, blue at the end) may fail
    assert load.stats.ok > 0 and load.stats.errors <= 0.03 * load.stats.sent, load.stats
    return rc, json.loads(rep.read_text())


def test_green_as_fast_as_blue_passes_analysis_at_each_stage(tmp_path: Path) -> None:
    env = Env(tmp_path, speed=20.0)  # analysis measures in wall time (Prometheus's clock)
    try:
        rc, report = _analysed(env, tmp_path, GREEN)
        assert rc == 0 and report["result"] == "succeeded", report["stages"][0]["analysis"]
        first, last = report["stages"]
        assert {m["role"] for m in first["analysis"]} == {"decode", "prefill"}
        phases = [m["phase"] for m in first["analysis"]]
        assert "failed" not in phases and phases.count("successful") >= 4, first["analysis"]
        assert "analysis skipped at green 100%" in last["hooks"][0]
    finally:
        env.close()


def test_slower_green_is_caught_at_the_first_weight_stage_and_shifted_back(tmp_path: Path) -> None:
    env = Env(tmp_path, speed=20.0)
    try:
        rc, report = _analysed(env, tmp_path, SLOWER)
        assert rc == 1 and report["result"] == "rolled-back", report
        first = report["stages"][0]
        assert first["result"] == "failed" and first["target_groups"] == 50
        failed = [m for m in first["analysis"] if m["phase"] == "failed"]
        assert failed and all(m["value"] > m["baseline"] * 1.1 for m in failed), first["analysis"]
        assert len(report["stages"]) == 1  # never went past the first weight stage
        # weights shifted back (green's backendRef removed), green deleted, blue untouched
        assert env.green_weights() == [None, 0, 50, None]
        rules = env.kube.get(HTTP_ROUTE, NS, "chat")["spec"]["rules"]
        assert rules[0]["backendRefs"] == [{**REF, "name": "chat", "weight": 100}]
        assert {o["metadata"]["name"] for o in env.kube.list(LWS, NS)[0]} == {"chat-decode", "chat-prefill"}
        assert {p["metadata"]["name"] for p in env.kube.list(INFERENCE_POOL, NS)[0]} == {"chat"}
        # the same manifest again reports the recorded outcome and writes nothing (--retry starts over)
        rv = env.kube.get(HTTP_ROUTE, NS, "chat")["metadata"]["resourceVersion"]
        assert main(["rollout", "run", "pair/chat", "-n", NS, "--kubeconfig", str(env.sim.kubeconfig),
                     "--manifest", str(env.manifest(SLOWER)), "--strategy", "blue-green",
                     "--weights", "50,100"]) == 1
        assert env.kube.get(HTTP_ROUTE, NS, "chat")["metadata"]["resourceVersion"] == rv
    finally:
        env.close()


def test_capacity_refusal_names_missing_gpus_and_writes_nothing(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    env = Env(tmp_path, gpus_per_node=8)
    try:
        env.deploy_blue(gpus=2)  # 2 roles x 2 groups x 2 GPUs: 8 of 8 GPUs in use
        route_before = env.kube.get(HTTP_ROUTE, NS, "chat")
        pool_before = env.kube.get(INFERENCE_POOL, NS, "chat")
        rc = main(["rollout", "run", "pair/chat", "-n", NS, "--kubeconfig", str(env.sim.kubeconfig),
                   "--manifest", str(env.manifest(GREEN)), "--strategy", "blue-green"])
        err = capsys.readouterr().err
        assert rc == 2
        assert "strategy" in err and "missing 4 GPUs in pool h100" in err, err  # green wants 1 GPU per pod
        after = env.kube.get(HTTP_ROUTE, NS, "chat")
        assert after["metadata"]["resourceVersion"] == route_before["metadata"]["resourceVersion"]
        assert env.kube.get(INFERENCE_POOL, NS, "chat")["spec"] == pool_before["spec"]
        assert len(env.kube.list(LWS, NS)[0]) == 2
    finally:
        env.close()


def test_cli_refuses_blue_green_misuse(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    kc = ["--kubeconfig", str(env.sim.kubeconfig)]
    cases = [(["lws/x", "--strategy", "blue-green"], "--manifest"),
             (["pair/x", "--strategy", "canary"], "strategy"),
             (["pair/x", "--weights", "10,100"], "--weights"),
             (["pair/x", "--strategy", "blue-green", "--manifest", "m", "--weights", "60,40"], "weights"),
             (["pair/x", "--strategy", "blue-green", "--manifest", "m", "--stages", "1,100%"], "--stages"),
             (["pair/x", "--strategy", "blue-green"], "--manifest")]
    for args, field in cases:
        assert main(["rollout", "run", *args, *kc]) == 2, args
        assert field in capsys.readouterr().err, args


def test_sigkill_mid_shift_then_resume(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    """The controller is killed (SIGKILL) while checking the 50% stage; a rerun re-checks that stage
    and goes on; no weight is written twice (docs/rollout.md "Crash safety")."""
    env.deploy_blue()
    mf = env.manifest(GREEN)
    base = [str(Path(sys.executable).parent / "lwsflow"), "rollout", "run", "pair/chat", "-n", NS,
            "--kubeconfig", str(env.sim.kubeconfig), "--manifest", str(mf), "--strategy", "blue-green",
            "--weights", "10,50,100", "--bake", "20s"]
    kill = ["--hook", 'sh -c "test $LWSFLOW_STAGE != 2 || kill -9 $PPID"']
    env_vars = dict(os.environ, LWSFLOW_LOG="")
    first = subprocess.run(base + kill, capture_output=True, text=True, timeout=120, env=env_vars)
    assert first.returncode == -9, first.stdout + first.stderr
    st = P.BlueGreenState.from_route(env.kube.get(HTTP_ROUTE, NS, "chat"))
    assert (st.phase, st.stage, st.passed) == (P.SHIFTING, 1, 1)
    assert env.green_weights() == [None, 0, 10, 50]
    kc = ["-n", NS, "--kubeconfig", str(env.sim.kubeconfig)]
    assert main(["rollout", "status", "pair/chat", *kc]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (row["strategy"], row["phase"], row["stage"], row["passed"], row["weights"]) == \
        ("blue-green", P.SHIFTING, 2, 1, [10, 50, 100])
    # a partition rollout of the blue pair is refused while the blue-green is in progress
    assert main(["rollout", "run", "pair/chat", *kc, "--manifest", str(mf)]) == 2
    assert "--strategy blue-green to resume it" in capsys.readouterr().err
    second = subprocess.run(base, capture_output=True, text=True, timeout=120, env=env_vars)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "succeeded" in second.stdout and "stage-2-passed" in second.stdout
    assert "stage-2-shifted" not in second.stdout  # the 50% weights were not written again
    assert env.green_weights() == [None, 0, 10, 50, 100]
    writes = [P.green_weight_of(r.object, st.green.pool) for r in env.routes.entries(ROUTES, "chat")]
    assert writes.count(50) >= 1 and Counter(w for w in writes)[10] >= 1
    assert P.BlueGreenState.from_route(env.kube.get(HTTP_ROUTE, NS, "chat")).phase == P.SUCCEEDED
    # a rerun after the end reports the recorded outcome and writes nothing
    rv = env.kube.get(HTTP_ROUTE, NS, "chat")["metadata"]["resourceVersion"]
    third = subprocess.run(base, capture_output=True, text=True, timeout=60, env=env_vars)
    assert third.returncode == 0 and "succeeded" in third.stdout, third.stdout + third.stderr
    assert env.kube.get(HTTP_ROUTE, NS, "chat")["metadata"]["resourceVersion"] == rv
