"""What the blue-green tests share (issue 18), whichever kind is blue: an embedded cluster with stand-in
engines, blue (a P/D pair of LWS, a DisaggregatedSet or a single LWS) behind its InferencePool and an
HTTPRoute, green's manifest, the route's recorded weights and the share of requests green serves.

llm-d's advice for P/D upgrades (docs/llm-d.md): a new InferencePool per revision, traffic moved by
HTTPRoute backendRef weights (Gateway API: a backend's share is weight / sum of weights).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from lwsflow.cli import main
from lwsflow.controller.api import labels as L
from lwsflow.controller.bluegreen import plan as P
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import DS, HTTP_ROUTE, INFERENCE_POOL, LWS, Resource
from lwsflow.controller.rollout import gate, session
from lwsflow.controller.rollout.ds import DsKind
from lwsflow.controller.rollout.hooks import HookContext, HookResult
from lwsflow.controller.rollout.options import RolloutOptions
from lwsflow.controller.rollout.outcome import Outcome
from lwsflow.sim.config import ClusterConfig, ImageProfile, PoolConfig, Timings
from lwsflow.sim.router import Router
from lwsflow.sim.testing import EmbeddedCluster, StoreRecorder
from reliability.ports import ReservedPort

NS = "default"
MODEL = "chat-model"
BLUE = "sha256:" + "1" * 64
GREEN = "sha256:" + "3" * 64  # as fast as blue
SLOWER = "sha256:" + "2" * 64  # ready, but 40% slower TTFT
LONG = "sha256:" + "4" * 64  # answers take ~5 s of wall time: requests still in flight at a rollback
ROUTES = "httproutes.gateway.networking.k8s.io"
POOLS = "inferencepools.inference.networking.k8s.io"
REF = {"group": "inference.networking.k8s.io", "kind": "InferencePool"}
DS_ROLES = ("prefill", "decode")
N_REQUESTS = 200  # per weight stage, through the router
# green's count of N_REQUESTS must be inside the binomial acceptance region of its weight at this
# two-sided false-alarm rate (exact tails): at 10% of 200 that is 6-37 requests, so a router that
# sends green nothing fails (a fixed +/-0.1 accepted 0% at the 10% stage)
SHARE_ALPHA = 1e-4
KILL_AT_STAGE_2 = ["--hook", 'sh -c "test $LWSFLOW_STAGE != 2 || kill -9 $PPID"']  # SIGKILLs the CLI

# p95 TTFT of green against blue, per role, no more than 10% worse (wall seconds: Prometheus's clock);
# initialDelay = window, the hook having waited for two scrapes of each pod (docs/analysis.md, the time rule)
SPEC = {"window": "5s", "metrics": [{
    "name": "ttft-p95", "initialDelay": "5s", "interval": "1s", "count": 3, "failureLimit": 1,
    "inconclusiveLimit": 1,
    "provider": {"prometheus": {"query": (
        'histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket'
        '{namespace="{{namespace}}",lws="{{lws}}",revision="{{revision}}"}[{{window}}])))')}},
    "compare": {"mode": "relative", "tolerance": 10}}]}

Seen = list[tuple[int, float, set[str]]]  # per checked stage: green's weight, its share, the decode pods


def image(ref: str) -> str:
    """A digest names the stand-in registry's image of it (profiled in the cluster); anything else is
    an image already."""
    return f"r.example/vllm@{ref}" if ref.startswith("sha256:") else ref


class Env:
    """The cluster and blue of one ``kind``: ``pair`` (LWS chat-prefill and chat-decode), ``ds`` (DS chat)
    or ``lws`` (LWS chat), each group one pod of ``gpus`` GPUs, 2 groups a role."""

    def __init__(self, tmp: Path, kind: str = "pair", *, speed: float = 50.0, gpus_per_node: int = 8,
                 ds_writes_status: bool = True) -> None:
        self.tmp, self.kind = tmp, kind
        self._port = ReservedPort()  # every pod's engine serves on it, at its pod IP
        self.port = self._port.port
        cfg = ClusterConfig(
            pools=[PoolConfig(name="h100", count=1, gpus_per_node=gpus_per_node, gpu_product="H100")],
            timings=Timings(pull_gbps=100.0, image_gb=0.1, cpu_image_gb=0.1, container_start_s=1.0,
                            weight_gb=0.0),
            images={BLUE: ImageProfile(ttft_s=0.045), GREEN: ImageProfile(ttft_s=0.045),
                    SLOWER: ImageProfile(ttft_s=0.063), LONG: ImageProfile(ttft_s=5.0)},
            ds_writes_status=ds_writes_status)
        self.sim = EmbeddedCluster(tmp, cfg, speed=speed, engines=True,
                                   engine_options={"side_channel_port": 0}).start()
        self.kube = Kube.connect(str(self.sim.kubeconfig))
        self.rec = StoreRecorder(self.sim, keys=[ROUTES, POOLS])

    def __enter__(self) -> Env:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def target(self) -> str:
        return f"{self.kind}/chat"

    # -- blue and green ----------------------------------------------------------------------------
    def _template(self, labels: dict[str, str], ref: str, gpus: int) -> dict[str, Any]:
        return {"replicas": 2, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
            "metadata": {"labels": dict(labels), "annotations": {
                "sim.lwsflow.io/load-seconds": "10", L.SERVED_MODEL: MODEL, L.SERVING_PORT: str(self.port)}},
            "spec": {"nodeSelector": {L.NODE_POOL: "h100"}, "containers": [{
                "name": "engine", "image": image(ref), "resources": {"limits": {L.GPU_RESOURCE: gpus}}}]}}}}

    def docs(self, ref: str, gpus: int = 1) -> list[dict[str, Any]]:
        """The workload of this kind on image ``ref`` (blue's, or green's manifest)."""
        if self.kind == "ds":
            roles = [{"name": r, "metadata": {"labels": {L.MODEL: "chat", L.ROLE: r}},
                      "spec": self._template({L.MODEL: "chat", L.ROLE: r}, ref, gpus)} for r in DS_ROLES]
            return [{"apiVersion": L.DS_API_VERSION, "kind": L.DS_KIND,
                     "metadata": {"name": "chat", "namespace": NS, "labels": {L.MODEL: "chat"}},
                     "spec": {"roles": roles}}]
        if self.kind == "lws":
            labels = {L.MODEL: "chat"}
            return [{"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
                     "metadata": {"name": "chat", "namespace": NS, "labels": dict(labels)},
                     "spec": self._template(labels, ref, gpus)}]
        out: list[dict[str, Any]] = []
        for r in P.ROLES:
            labels = {L.MODEL: "chat", L.PD_PAIR: "chat", L.ROLE: r}
            out.append({"apiVersion": L.LWS_API_VERSION, "kind": L.LWS_KIND,
                        "metadata": {"name": f"chat-{r}", "namespace": NS, "labels": dict(labels)},
                        "spec": self._template(labels, ref, gpus)})
        return out

    def deploy_blue(self, ref: str = BLUE, gpus: int = 1) -> None:
        """Blue, the InferencePool ``chat`` selecting its leader pods and the HTTPRoute ``chat`` sending it
        every request; returns once blue is ready."""
        for doc in self.docs(ref, gpus):
            self.kube.create(DS if doc["kind"] == L.DS_KIND else LWS, NS, doc)
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
        while (why := self._blue_not_ready()) is not None:
            assert time.monotonic() < end, f"blue never became ready{why}"
            time.sleep(0.1)

    def _blue_not_ready(self) -> str | None:
        """None once blue is ready (each kind by its own gate), else what to add to the message."""
        if self.kind == "ds":
            check = DsKind(self.kube, NS).gate(self.kube.get(DS, NS, "chat"), 1)
            return None if check.passed else f": {check.detail}"
        if self.kind == "lws":
            return None if gate.lws_fully_rolled(self.kube.get(LWS, NS, "chat")).passed else ""
        ready = [(self.kube.get(LWS, NS, f"chat-{r}").get("status") or {}).get("readyReplicas")
                 for r in P.ROLES]
        return None if ready == [2, 2] else ""

    def manifest(self, ref: str) -> Path:
        """Green's manifest: blue's workload on image ``ref``."""
        path = self.tmp / f"green-{hashlib.sha256(ref.encode()).hexdigest()[:8]}.yaml"
        path.write_text(yaml.safe_dump_all(self.docs(ref)))
        return path

    # -- what the cluster shows --------------------------------------------------------------------
    def green_weights(self) -> list[int | None]:
        """Green's weight after each recorded write of the route (None: no green backendRef)."""
        out: list[int | None] = []
        for rec in self.rec.entries(ROUTES, "chat"):
            st = P.BlueGreenState.from_route(rec.object)
            w = P.green_weight_of(rec.object, st.green.pool) if st.green else None
            if not out or out[-1] != w:
                out.append(w)
        return out

    def route(self) -> dict[str, Any]:
        return self.kube.get(HTTP_ROUTE, NS, "chat")

    def route_state(self) -> P.BlueGreenState:
        return P.BlueGreenState.from_route(self.route())

    def backend_refs(self) -> list[dict[str, Any]]:
        return list(self.route()["spec"]["rules"][0]["backendRefs"])

    def names(self, res: Resource) -> list[str]:
        return [o["metadata"]["name"] for o in self.kube.list(res, NS)[0]]

    # -- the CLI -----------------------------------------------------------------------------------
    def bg_args(self, manifest: Path | str, *extra: str) -> list[str]:
        """``rollout run <kind>/chat --strategy blue-green`` on this cluster, for ``main`` or ``lwsflow``."""
        return ["rollout", "run", self.target, "-n", NS, "--kubeconfig", str(self.sim.kubeconfig),
                "--manifest", str(manifest), "--strategy", "blue-green", *extra]

    def close(self) -> None:
        self.rec.stop()
        self.kube.api.close()
        self.sim.close()
        self._port.close()


def env_fixture(kind: str) -> Any:
    """A module's ``env`` fixture: an ``Env`` of ``kind`` with the default cluster, closed after the test."""
    @pytest.fixture
    def env(tmp_path: Path) -> Iterator[Env]:
        with Env(tmp_path, kind) as e:
            yield e
    return env


def only(pool: str) -> list[dict[str, Any]]:
    """The route's backendRefs when ``pool`` takes every request."""
    return [{**REF, "name": pool, "weight": 100}]


def lwsflow(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """The CLI as its own process (so a hook can SIGKILL it), quiet logs."""
    return subprocess.run([str(Path(sys.executable).parent / "lwsflow"), *args], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, LWSFLOW_LOG=""))


def share_hook(router: Router, seen: Seen) -> Callable[[HookContext], HookResult]:
    """At each weight stage: N seeded requests through the router; the share served by green's pods,
    whose names all start with green's (pair ``<pair>-<role>-<i>``, DS ``<ds>-<role>-...``, LWS
    ``<lws>-<i>``)."""
    def traffic(ctx: HookContext) -> HookResult:
        router.routes.clear()
        body = {"model": MODEL, "prompt": "hi", "max_tokens": 1}
        # 8 at a time: the seeded weight draws are the same sequence whichever request makes them
        with httpx.Client(timeout=30) as http, ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(lambda _i: http.post(f"{router.url}/v1/completions", json=body).status_code,
                                  range(N_REQUESTS)))
        assert codes == [200] * N_REQUESTS
        pods = Counter(r.decode.pod for r in router.routes)
        share = sum(n for pod, n in pods.items() if pod.startswith(f"{ctx.name}-")) / N_REQUESTS
        seen.append((ctx.target_groups, share, set(pods)))
        return HookResult(True, f"green share {share:.2f} at weight {ctx.target_groups}")
    return traffic


def binomial_tails(k: int, n: int, p: float) -> tuple[float, float]:
    """(P(X <= k), P(X >= k)) for X ~ Binomial(n, p), exact."""
    pmf = [math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(n + 1)]
    return sum(pmf[:k + 1]), sum(pmf[k:])


def share_fits(weight: int, share: float, n: int = N_REQUESTS, alpha: float = SHARE_ALPHA) -> bool:
    """Green's ``share`` of ``n`` requests is what a router honouring ``weight`` percent sends: its
    count is in neither ``alpha / 2`` tail of Binomial(n, weight / 100)."""
    low, high = binomial_tails(round(share * n), n, weight / 100)
    return min(low, high) >= alpha / 2


def assert_shares(seen: Seen, weights: list[int], env: Env | None = None) -> None:
    """Each of ``weights`` checked once, in order, green's share what its weight sends
    (``share_fits``); with ``env``, each weight written to the route once (green_weights: one
    write per change, none going back to an earlier weight)."""
    assert [w for w, _s, _p in seen] == weights, seen
    for weight, share, _pods in seen:
        assert share_fits(weight, share), (weight, share)
    if env is not None:
        written = [w for w in env.green_weights() if w is not None]
        assert len(written) == len(set(written)), written
        assert all(written.count(w) == 1 for w in weights), (written, weights)


def assert_blue_pool_narrowed(env: Env, label: str) -> None:
    """The blue pool was narrowed to blue's pods (``label: chat``) by a write made while no green pod
    existed."""
    writes = [r for r in env.rec.entries(POOLS, "chat") if r.type != "DELETED"
              and label in r.object["spec"]["selector"]["matchLabels"]]
    assert writes, "the blue pool was never narrowed"
    first = writes[0]
    assert first.object["spec"]["selector"]["matchLabels"] == {L.MODEL: "chat", L.WORKER_INDEX: "0",
                                                                label: "chat"}
    owners = {(p["metadata"].get("labels") or {}).get(label) for p in first.pods.values()}
    assert owners == {"chat"}, owners


def load(router: Router) -> AbstractContextManager[Any]:
    """Seeded load through the router for analysis. Prompts of 20-40 words (>= 16 tokens) are
    disaggregated, so both roles serve and are compared. Not streamed: for a stream the stand-in engine
    measures TTFT in wall time, and on a loaded 2-core machine thread scheduling moves that p95 by more
    than the 10% tolerance between equal revisions."""
    from lwsflow.components.loadgen import LoadGenerator, LoadSpec

    return LoadGenerator(LoadSpec(model=MODEL, rate=40, seed=3, max_tokens=(2, 4), prompt_words=(20, 40),
                                  stream_share=0.0), lambda: [router.url])


def shift_with_traffic(env: Env, ref: str = GREEN, *, blue: str = BLUE,
                       check: Callable[[HookContext], None] | None = None) -> tuple[Outcome, Seen, list[str]]:
    """Blue on image ``blue`` deployed, then green on image ``ref`` at 10, 50 then 100%, 30 s baked each,
    through the library; at each stage ``check`` (when given) then the traffic share. The outcome, what
    each stage saw and the log lines."""
    env.deploy_blue(blue)
    seen: Seen = []
    lines: list[str] = []
    with Router(env.sim.store, seed=11) as router:
        share = share_hook(router, seen)

        def hook(ctx: HookContext) -> HookResult:
            if check is not None:
                check(ctx)
            return share(ctx)
        opts = RolloutOptions(bake_s=30, deadline_s=600, hooks=[hook])
        out = session.run(env.kube, session.clock_for(env.kube), session.parse_target(env.target, NS), opts,
                          manifest=env.manifest(ref), strategy="blue-green", weights=[10, 50, 100],
                          log=lines.append)
    return out, seen, lines


def analysed(env: Env, ref: str) -> tuple[int, dict[str, Any]]:
    """Blue (deployed) to green on image ``ref`` at 50% then 100% through the CLI, with seeded load
    through the router and the analysis (SPEC) at each stage: the exit code and the report."""
    env.deploy_blue()
    spec, rep = env.tmp / "analysis.yaml", env.tmp / "report.json"
    spec.write_text(yaml.safe_dump(SPEC))
    with Router(env.sim.store, seed=5) as router, load(router) as gen:
        rc = main(env.bg_args(env.manifest(ref), "--weights", "50,100", "--analysis", str(spec),
                              "--prometheus", "local", "--report", str(rep)))
    # a request in flight to a pod being deleted (green on rollback, blue at the end) may fail
    assert gen.stats.ok > 0 and gen.stats.errors <= 0.03 * gen.stats.sent, gen.stats
    return rc, json.loads(rep.read_text())
